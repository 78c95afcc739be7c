"""The Service Bus settings the coordinator trigger depends on, read from the deployment files.

The Functions extension runs a batched session trigger in one receive loop per instance
that renews no lock, so the completion queue's lock duration, the coordinator's time
budget, host.json's session keys and the capacity figures in docs/scaling.md must agree.
The Bicep is parsed with pycep and resolved with tests/infra/bicep_eval.py for both tiers.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from dagq.backends.azure.servicebus import MAX_BODY
from dagq.core.limits import SERVICE_BUS_STANDARD_MESSAGE_BYTES
from dagq.functions.coordinator_sb import (
    BUDGET_SHARE,
    DEFAULT_LOCK_S,
    LOCK_RANGE_S,
    lock_budget,
    servicebus_blueprint,
)
from dagq.functions.runtime import Runtime
from tests.infra.bicep_eval import Evaluator, parse

ROOT = Path(__file__).resolve().parents[2]
SERVICEBUS_BICEP = ROOT / "infra" / "modules" / "servicebus.bicep"
HOST_JSON = ROOT / "host.json"
SCALING_MD = ROOT / "docs" / "scaling.md"
FUNCTIONS_MD = ROOT / "docs" / "functions.md"

MAX_LOCK_S = 300.0
"""Service Bus: "The maximum value for LockDuration is 5 minutes"
(https://learn.microsoft.com/azure/templates/microsoft.servicebus/namespaces/queues)."""
PREMIUM_MESSAGE_KB = (1024, 102400)
"""Premium per-entity message size limit: 1 MB (the default) to 100 MB
(https://learn.microsoft.com/azure/service-bus-messaging/service-bus-premium-messaging)."""
BATCH_ONLY_NOT_APPLICABLE = {"maxAutoLockRenewalDuration", "maxConcurrentSessions",
                             "maxConcurrentCalls"}
"""host.json keys that "only apply for functions that receive a single message at a time"
(https://learn.microsoft.com/azure/azure-functions/functions-bindings-service-bus#hostjson-settings)."""
T_BATCH_S = 0.1
T_SWITCH_S = 0.05
"""The per-batch and per-session-switch times docs/scaling.md assumes."""


def iso_seconds(value: str) -> float:
    """Seconds of an ISO 8601 duration such as PT5M, PT90S or PT1M30S."""
    m = re.fullmatch(r"PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?", value)
    assert m and value != "PT", f"not an ISO 8601 time duration: {value!r}"
    hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return hours * 3600 + minutes * 60 + seconds


def timespan_seconds(value: str) -> float:
    """Seconds of a .NET TimeSpan string such as 00:00:01 or 00:00:00.500."""
    hours, minutes, seconds = value.split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def queues(sku: str, lock_s: int = 60) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The completion queue's and the task queues' properties as deployed for ``sku``."""
    template = parse(SERVICEBUS_BICEP.read_text())
    ev = Evaluator(template, {"storePrefix": "dagq", "hardwareClasses": ["cpu", "gpu"],
                              "lockDurationSeconds": lock_s, "sku": sku})
    completions = ev(template["resources"]["completions"]["config"])["properties"]
    tasks = [q["properties"] for q in ev(template["resources"]["taskQueues"]["config"])]
    return completions, tasks


def service_bus_host() -> dict[str, Any]:
    sb: dict[str, Any] = json.loads(HOST_JSON.read_text())["extensions"]["serviceBus"]
    return sb


# ---------------------------------------------------------------- lock duration and budget


@pytest.mark.parametrize("sku", ["Standard", "Premium"])
def test_the_completion_queue_locks_for_the_longest_time_service_bus_allows(sku: str) -> None:
    completions, tasks = queues(sku, lock_s=90)
    assert iso_seconds(completions["lockDuration"]) == MAX_LOCK_S
    assert [q["lockDuration"] for q in tasks] == ["PT90S", "PT90S"]  # the parameter's


def test_the_coordinator_budget_fits_inside_the_deployed_lock() -> None:
    completions, _ = queues("Standard")
    lock_s = iso_seconds(completions["lockDuration"])
    assert lock_s == DEFAULT_LOCK_S  # DAGQ_SB_LOCK_DURATION unset means the deployed lock
    assert LOCK_RANGE_S[1] == MAX_LOCK_S
    budget = lock_budget({})
    assert budget.seconds == lock_s * BUDGET_SHARE
    assert lock_s - budget.seconds >= 60.0  # margin for the last chunk and the settling


def test_host_json_leaves_out_what_a_batch_trigger_ignores() -> None:
    sb = service_bus_host()
    assert not BATCH_ONLY_NOT_APPLICABLE & set(sb), BATCH_ONLY_NOT_APPLICABLE & set(sb)
    assert sb["autoCompleteMessages"] is True  # a returned batch is completed as a whole


def test_the_trigger_is_the_batched_session_trigger_the_settings_assume(
        tmp_path: Path) -> None:
    from tests.functions.host import app_of

    runtime = Runtime({"DAGQ_STORE": f"sqlite:{tmp_path / 'dagq.db'}"})
    [function] = app_of(servicebus_blueprint(runtime)).get_functions()
    [binding] = [b for b in json.loads(function.get_function_json())["bindings"]
                 if b["direction"] == "IN"]
    assert binding["type"] == "serviceBusTrigger"
    assert binding["isSessionsEnabled"] is True
    assert str(binding["cardinality"]).lower() == "many"


# ---------------------------------------------------------------- message size


def test_premium_queues_take_every_message_dagq_sends() -> None:
    completions, tasks = queues("Premium")
    needed_kb = math.ceil(SERVICE_BUS_STANDARD_MESSAGE_BYTES / 1024)
    assert MAX_BODY < SERVICE_BUS_STANDARD_MESSAGE_BYTES  # the adapter's cap on both tiers
    for queue in [completions, *tasks]:
        size = queue["maxMessageSizeInKilobytes"]
        assert isinstance(size, int)
        assert PREMIUM_MESSAGE_KB[0] <= size <= PREMIUM_MESSAGE_KB[1]
        assert size >= needed_kb


def test_standard_queues_do_not_set_a_premium_only_property() -> None:
    completions, tasks = queues("Standard")
    for queue in [completions, *tasks]:
        assert queue["maxMessageSizeInKilobytes"] is None  # null: left out of the request


# ---------------------------------------------------------------- the capacity model


def test_docs_state_the_session_values_host_json_sets() -> None:
    sb = service_bus_host()
    idle_s = timespan_seconds(sb["sessionIdleTimeout"])
    batch = sb["maxMessageBatchSize"]
    assert 0 < idle_s <= 2.0
    scaling = SCALING_MD.read_text()
    assert f"`B` = `maxMessageBatchSize` ({batch})" in scaling
    assert f"`T_idle` = `sessionIdleTimeout` ({idle_s:g} s)" in scaling
    functions = FUNCTIONS_MD.read_text()
    assert f"`sessionIdleTimeout` ({idle_s:g} s)" in functions
    assert f"`maxMessageBatchSize` {batch}, `sessionIdleTimeout` {idle_s:g} s" in functions


def _capacity_rows() -> list[list[str]]:
    text = SCALING_MD.read_text()
    start = text.index("| case | N | k | completions/s | a workflow waits |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def _about(cell: str) -> float:
    return float(cell.lstrip("~").rstrip(" s"))


def test_the_documented_capacity_follows_from_host_json() -> None:
    sb = service_bus_host()
    batch = sb["maxMessageBatchSize"]
    host_idle = timespan_seconds(sb["sessionIdleTimeout"])
    rows = _capacity_rows()
    assert len(rows) >= 3
    workflows = 100
    for case, n_cell, k_cell, rate_cell, wait_cell in rows:
        n, k = int(n_cell), int(k_cell)
        named = re.search(r"`T_idle` (\d+(?:\.\d+)?) s", case)
        idle = float(named.group(1)) if named else host_idle
        visit = idle + T_SWITCH_S + math.ceil(k / batch) * T_BATCH_S
        assert _about(rate_cell) == pytest.approx(n * k / visit, rel=0.1), case
        if wait_cell:
            assert _about(wait_cell) == pytest.approx(workflows / n * visit, rel=0.1), case
    assert any(f"`T_idle` {host_idle:g} s" in row[0] for row in rows)  # the deployed value

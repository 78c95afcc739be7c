"""Mapped tasks end to end on the embedded store, through the real ``dagq`` processes:
items reaching tasks (shell quoting, ``$DAGQ_ITEM``, a function's ``item`` argument),
10,000 instances, and the coordinator killed with SIGKILL while a map expands."""

from __future__ import annotations

import json
import signal
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from dagq.backends import open_backend
from dagq.core.engine import loads
from tests.e2e.harness import Dagq, executions

SCAN = ("printf '%s' \"$ITEMS\" > \"$DAGQ_OUTPUT_FILE\"")


def scan_task(items: object) -> dict[str, object]:
    return {"name": "scan", "kwargs": {"cmd": SCAN,
                                       "env": {"ITEMS": json.dumps({"files": items})}}}


def logged(log: Path) -> str:
    return (f'echo "$DAGQ_WORKFLOW_ID $DAGQ_TASK $DAGQ_ATTEMPT" >> {log}; '
            "printf '{\"n\": %s}' \"$DAGQ_ATTEMPT\" > \"$DAGQ_OUTPUT_FILE\"")


def test_items_reach_shell_and_function_tasks(dagq: Dagq) -> None:
    mod = dagq.write("mapfns.py", textwrap.dedent("""
        def size(item, inputs):
            return {"path": item["path"], "twice": item["n"] * 2, "seen": sorted(inputs)}
    """))
    items = [{"path": "a b'c", "n": 1}, {"path": "$(touch pwned); `id`", "n": 2}]
    path = dagq.define("items", [
        scan_task(items),
        {"name": "conf", "kwargs": {"cmd": "echo '{\"k\": 1}' > $DAGQ_OUTPUT_FILE"}},
        {"name": "echo", "depends_on": ["scan"], "map": {"over": "inputs.scan.files"},
         "kwargs": {"cmd": 'printf \'{"arg": "%s", "env": %s}\' {item.path} '
                           '"$DAGQ_ITEM" > "$DAGQ_OUTPUT_FILE"'}},
        {"name": "call", "depends_on": ["scan", "conf"],
         "map": {"over": "inputs.scan.files"},
         "kwargs": {"call": "mapfns:size", "cwd": str(mod.parent)}},
        {"name": "end", "depends_on": ["echo", "call"],
         "condition": "all(inputs.call.twice > 0)", "kwargs": {"cmd": "true"}},
    ])
    dagq.worker(concurrency=2)
    dagq.coordinator()
    wf = dagq.submit(path)
    assert dagq.wait_terminal(wf)["status"] == "completed", dagq.diagnostics(wf)
    assert [dagq.output(wf, f"echo[{k}]") for k in range(2)] == [
        {"arg": item["path"], "env": item} for item in items]
    assert dagq.output(wf, "call[1]") == {"path": items[1]["path"], "twice": 4,
                                          "seen": ["conf"]}
    assert not (dagq.root / "pwned").exists()
    assert dagq.statuses(wf)["end"] == "completed"


@pytest.mark.slow
def test_ten_thousand_instances_end_to_end(dagq: Dagq) -> None:
    n = 10_000
    path = dagq.define("wide", [
        scan_task(list(range(n))),
        {"name": "fit", "depends_on": ["scan"], "map": {"over": "inputs.scan.files"},
         "kwargs": {"cmd": "true"}},
        {"name": "reduce", "depends_on": ["fit"], "kwargs": {"cmd": "true"}},
    ])
    dagq.worker(concurrency=4)
    dagq.coordinator()
    wf = dagq.submit(path)
    assert dagq.wait_terminal(wf, deadline_s=600)["status"] == "completed", \
        dagq.diagnostics()
    state = _state(dagq, wf)
    # the expanded head counts as its instances, not as one more task
    assert len(state.st) == n + 3 and state.counts() == {"completed": n + 2}
    assert len(state.inputs_of("reduce")["fit"]) == n


@pytest.mark.slow
@pytest.mark.parametrize("point", ["map_after_apply", "map_after_write", "map_after_send"])
def test_coordinator_killed_while_a_map_expands(dagq: Dagq, point: str) -> None:
    n = 200
    log = dagq.root / "runs.log"
    path = dagq.define("crash", [
        scan_task(list(range(n))),
        {"name": "fit", "depends_on": ["scan"], "map": {"over": "inputs.scan.files"},
         "kwargs": {"cmd": logged(log)}},
        {"name": "reduce", "depends_on": ["fit"], "kwargs": {"cmd": "true"}},
    ])
    dagq.worker(concurrency=3)
    wf = dagq.submit(path)
    doomed = dagq.coordinator(env={"DAGQ_CRASH_AT": point})
    assert doomed.wait(60) == -signal.SIGKILL, doomed.text()
    stored = _state(dagq, wf)
    assert stored.status == "running"
    assert bool(stored.maps) == (point != "map_after_apply"), "did not crash mid-expansion"
    dagq.coordinator()
    assert dagq.wait_terminal(wf, deadline_s=180)["status"] == "completed", \
        dagq.diagnostics(wf)
    state = _state(dagq, wf)
    names = [v.name for v in state.iter_task_views()]
    assert names == ["scan", "fit", "reduce", *[f"fit[{k}]" for k in range(n)]]
    assert len(state.inputs_of("reduce")["fit"]) == n
    runs = Counter(task for w, task, _ in executions(log) if w == wf)
    assert set(runs) == {f"fit[{k}]" for k in range(n)}  # none lost
    if point != "map_after_send":  # nothing was sent before the crash: nothing twice
        assert max(runs.values()) == 1, [t for t, c in runs.items() if c > 1]


def _state(dagq: Dagq, wf: str):  # type: ignore[no-untyped-def]
    backend = open_backend(dagq.store)
    try:
        return loads(backend.states.read(wf)[0])
    finally:
        backend.close()

"""Settings the store, the KEDA scalers and the Batch templates depend on.

- The storage account keeps no soft-deleted snapshots of overwritten blobs (state blobs and
  log tails are overwritten all the time) but keeps container soft delete.
- Each KEDA Storage-queue trigger counts the messages its kind of workload needs counted,
  and the 32-message peek limit of ``visibleonly`` never changes a scaling decision.
- The Batch worker task spells out the image's entrypoint, so it runs whether Batch appends
  its command line to the ENTRYPOINT or runs it in its place; the pool uses a node agent
  whose support has not ended.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.infra.bicep_eval import body_of, parse

ROOT = Path(__file__).resolve().parents[2]
STORAGE = ROOT / "infra" / "modules" / "storage.bicep"
WORKERS = ROOT / "workers"
KEDA_STORAGE = WORKERS / "deploy" / "aks" / "keda-storage-queue"
KEDA_SERVICEBUS = WORKERS / "deploy" / "aks" / "keda-servicebus"
BATCH = WORKERS / "deploy" / "batch"

# The azure-queue scaler's "visibleonly" peeks at most this many messages and falls back to
# the approximate count (invisible messages included) when the peek comes back full:
# https://github.com/kedacore/keda/blob/v2.16.0/pkg/scalers/azure_queue_scaler.go#L40
# https://github.com/kedacore/keda/blob/v2.16.0/pkg/scalers/azure_queue_scaler.go#L149-L169
KEDA_PEEK_LIMIT = 32

# Batch node agents whose support ends, with the date (Azure Batch retirement notices
# https://github.com/Azure/Batch/issues/174 for 20.04 and
# https://github.com/Azure/Batch/issues/200 for 22.04):
NODE_AGENT_END_OF_SUPPORT = {
    "batch.node.ubuntu 20.04": date(2025, 4, 23),
    "batch.node.ubuntu 22.04": date(2027, 6, 30),
}

Doc = dict[str, Any]


# ---- storage account ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def blob_service() -> Doc:
    body: Doc = body_of(parse(STORAGE.read_text())["resources"]["blobService"]["config"])
    return body


def test_overwritten_blobs_leave_no_soft_deleted_snapshots(blob_service: Doc) -> None:
    props = blob_service["properties"]
    assert props["deleteRetentionPolicy"]["enabled"] is False, "blob soft delete must be off"
    assert "days" not in props["deleteRetentionPolicy"]
    assert props.get("isVersioningEnabled") is False, "versioning keeps a version per write"
    assert "restorePolicy" not in props  # point-in-time restore needs soft delete and versions


def test_a_deleted_container_stays_recoverable(blob_service: Doc) -> None:
    policy = blob_service["properties"]["containerDeleteRetentionPolicy"]
    assert policy == {"enabled": True, "days": "deleteRetentionDays"}
    param = re.search(r"@minValue\((\d+)\)\s*@maxValue\((\d+)\)\s*param deleteRetentionDays int\b",
                      STORAGE.read_text())
    assert param and int(param[1]) >= 1 and int(param[2]) <= 365


# ---- KEDA -----------------------------------------------------------------------------------


def _objects(folder: Path) -> list[Doc]:
    docs: list[Doc] = []
    for path in sorted(folder.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    return [d for d in docs if d.get("apiVersion", "").startswith("keda.sh/")]


def _scalers(folder: Path) -> list[Doc]:
    return [d for d in _objects(folder) if d["kind"] in ("ScaledObject", "ScaledJob")]


def keda_queue_count(visible: int, invisible: int, strategy: str) -> int:
    """What the azure-queue scaler reports (a model of getMessageCount in KEDA 2.16)."""
    if strategy == "visibleonly":
        peeked = min(visible, KEDA_PEEK_LIMIT)
        if peeked < KEDA_PEEK_LIMIT:
            return peeked
    return visible + invisible


def replicas(obj: Doc, count: int, running: int = 0, pending: int = 0) -> int:
    """Replicas (ScaledObject) or Jobs to create (ScaledJob, 'accurate') for a count."""
    (trigger,) = obj["spec"]["triggers"]
    target = int(trigger["metadata"]["queueLength"])
    top = obj["spec"]["maxReplicaCount"]
    want = min(top, math.ceil(count / target))
    if obj["kind"] == "ScaledObject":
        return want
    assert obj["spec"]["scalingStrategy"]["strategy"] == "accurate"
    return top - running if want + running > top else want - pending


def test_storage_queue_strategy_follows_the_kind_of_workload() -> None:
    scalers = _scalers(KEDA_STORAGE)
    assert {d["kind"] for d in scalers} == {"ScaledObject", "ScaledJob"}
    for obj in scalers:
        (trigger,) = obj["spec"]["triggers"]
        assert trigger["type"] == "azure-queue"
        strategy = trigger["metadata"].get("queueLengthStrategy")
        name = obj["metadata"]["name"]
        if obj["kind"] == "ScaledObject":
            # A Deployment is scaled in by KEDA: its running tasks (invisible) must count.
            assert strategy == "all", f"{name}: running tasks would not keep their replicas"
        else:
            # A Job is never scaled in: count only what a new Job could take now, so delayed
            # and backing-off tasks start no GPU node.
            assert strategy == "visibleonly", f"{name}: delayed tasks would start Jobs"


def test_running_tasks_keep_their_deployment_and_delays_start_no_job() -> None:
    for obj in _scalers(KEDA_STORAGE):
        strategy = obj["spec"]["triggers"][0]["metadata"]["queueLengthStrategy"]
        if obj["kind"] == "ScaledObject":
            # Three tasks running, nothing waiting: the replicas running them stay.
            assert replicas(obj, keda_queue_count(0, 3, strategy)) >= 1, obj["metadata"]["name"]
        else:
            # Three tasks waiting out a delay, nothing visible: no Job is started.
            assert replicas(obj, keda_queue_count(0, 3, strategy)) == 0, obj["metadata"]["name"]


@pytest.mark.parametrize("folder", [KEDA_STORAGE], ids=["keda-storage-queue"])
def test_the_visibleonly_fallback_never_changes_a_decision(folder: Path) -> None:
    """At >= 32 visible messages the scaler counts invisible ones too; that must only ever
    happen when the scaler already asks for its maximum."""
    checked = 0
    for obj in _scalers(folder):
        meta = obj["spec"]["triggers"][0]["metadata"]
        if meta.get("queueLengthStrategy") != "visibleonly":
            continue
        top = obj["spec"]["maxReplicaCount"]
        assert top * int(meta["queueLength"]) <= KEDA_PEEK_LIMIT, obj["metadata"]["name"]
        for visible in range(0, 3 * KEDA_PEEK_LIMIT):
            for invisible in (0, 1, 7, 40, 500):
                for running in range(top + 1):
                    for pending in range(top - running + 1):
                        exact = replicas(obj, visible, running, pending)
                        seen = keda_queue_count(visible, invisible, "visibleonly")
                        assert replicas(obj, seen, running, pending) == exact
        checked += 1
    assert checked, "no visibleonly trigger found"


def test_the_fallback_model_catches_a_scaler_that_could_exceed_the_peek_limit() -> None:
    job = next(d for d in _scalers(KEDA_STORAGE) if d["kind"] == "ScaledJob")
    wide = json.loads(json.dumps(job))
    wide["spec"]["maxReplicaCount"] = 40
    exact = replicas(wide, 33)
    assert replicas(wide, keda_queue_count(33, 20, "visibleonly")) != exact


def test_manifests_document_the_strategy_and_its_fallback() -> None:
    job_text = (KEDA_STORAGE / "scaledjob-gpu-long.yaml").read_text(encoding="utf-8")
    assert "azure_queue_scaler.go#L40" in job_text and "32" in job_text
    objects_text = (KEDA_STORAGE / "scaledobjects.yaml").read_text(encoding="utf-8")
    assert "visibleonly" in objects_text and "cooldownPeriod" in objects_text


def test_servicebus_scalers_count_active_messages_only() -> None:
    scalers = _scalers(KEDA_SERVICEBUS)
    assert scalers
    for obj in scalers:
        (trigger,) = obj["spec"]["triggers"]
        assert trigger["type"] == "azure-servicebus"
        # The scaler reads ActiveMessageCount; it has no strategy to set.
        assert "queueLengthStrategy" not in trigger["metadata"]
    text = (KEDA_SERVICEBUS / "scaledobjects.yaml").read_text(encoding="utf-8")
    assert "ActiveMessageCount" in text and "ScheduledMessageCount" in text


# ---- Azure Batch ----------------------------------------------------------------------------


def _json(name: str) -> Doc:
    data: Doc = json.loads((BATCH / name).read_text(encoding="utf-8"))
    return data


def _entrypoint(dockerfile: Path) -> list[str]:
    lines = [ln for ln in dockerfile.read_text(encoding="utf-8").splitlines()
             if ln.startswith("ENTRYPOINT ")]
    entry: list[str] = json.loads(lines[-1].split(None, 1)[1])
    return entry


def _dockerfile_of(image: str) -> Path:
    repository = image.rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]
    suffix = repository.removeprefix("dagq-worker")
    return WORKERS / f"Dockerfile{suffix.replace('-', '.', 1)}"


def _run_option(options: list[str], flag: str) -> str | None:
    for i, opt in enumerate(options):
        if opt == flag:
            return options[i + 1]
        if opt.startswith(flag + "="):
            return opt.split("=", 1)[1]
    return None


def _argv(task: Doc, image_entrypoint: list[str], batch_appends: bool) -> list[str]:
    """The process a Batch container task starts, for either reading of Batch's docs."""
    command = shlex.split(task["commandLine"])
    if not batch_appends:  # the command line replaces the image's ENTRYPOINT
        return command
    options = shlex.split(task["containerSettings"].get("containerRunOptions", ""))
    override = _run_option(options, "--entrypoint")
    argv = ([override] if override is not None else image_entrypoint) + command
    if argv[0] in ("/usr/bin/env", "env"):  # env runs its arguments as the command
        argv = argv[1:]
    return argv


def test_batch_task_runs_the_worker_whichever_way_batch_treats_the_entrypoint() -> None:
    task, job = _json("task.json"), _json("job.json")
    env = {e["name"]: e["value"] for e in job["commonEnvironmentSettings"]}
    dockerfile = _dockerfile_of(task["containerSettings"]["imageName"])
    assert dockerfile.name == "Dockerfile.gpu"
    entry = _entrypoint(dockerfile)
    assert entry == ["/usr/bin/tini", "--", "/opt/venv/bin/dagq", "worker"]
    expected = [*entry, env["DAGQ_WORKER_QUEUE"], "--idle-timeout", "600"]
    for batch_appends in (False, True):
        assert _argv(task, entry, batch_appends) == expected, f"appends={batch_appends}"


def test_the_entrypoint_check_rejects_a_bare_argument_list() -> None:
    task = _json("task.json")
    entry = _entrypoint(WORKERS / "Dockerfile.gpu")
    bare = json.loads(json.dumps(task))
    bare["commandLine"] = "gpu --idle-timeout 600"
    assert _argv(bare, entry, batch_appends=False)[0] == "gpu"  # not an executable
    no_override = json.loads(json.dumps(task))
    no_override["containerSettings"]["containerRunOptions"] = "--rm"
    assert _argv(no_override, entry, batch_appends=True).count("worker") == 2


def test_batch_pool_uses_a_supported_node_agent_and_matching_image() -> None:
    vm = _json("pool.json")["properties"]["deploymentConfiguration"]["virtualMachineConfiguration"]
    image, agent = vm["imageReference"], vm["nodeAgentSkuId"]
    ends = NODE_AGENT_END_OF_SUPPORT.get(agent)
    assert ends is None, f"support for {agent} ends on {ends}"
    offer = (image["publisher"], image["offer"], image["sku"])
    assert offer == ("microsoft-dsvm", "ubuntu-hpc", "2404")
    version = re.fullmatch(r"batch\.node\.ubuntu (\d\d)\.(\d\d)", agent)
    assert version and image["sku"] == version[1] + version[2], "node agent and image differ"
    assert vm["containerConfiguration"]["type"] == "DockerCompatible"

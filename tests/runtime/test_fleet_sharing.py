"""Concurrency keys and priorities on real stores (embedded SQLite and Azurite): never
more attempts of a key running than its limit across workflows (counted from the tasks'
own log), a waiting attempt explained, a holder left by a dead coordinator dropped by
the sweep, and a high band drained before a low one (docs/concurrency.md)."""

from __future__ import annotations

import time
from pathlib import Path

from dagq.client import WorkflowClient
from dagq.config import Settings
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES, TaskDef, WorkflowDef
from dagq.ports import Backend
from dagq.protocol import slots as slot_records
from dagq.runtime.coordinator import Coordinator
from dagq.runtime.slots import Slots
from dagq.views.observe import explanations
from dagq.worker.runtime import Worker
from tests.runtime.running import run_threads_until

FAST = Settings(sweep_interval=0.5, outbox_grace=1.0, outbox_flush=0.2, idle_poll=0.05,
                heartbeat_interval=1.0)


def logged(log: Path, sleep: float = 0.4) -> str:
    return (f"echo \"+ $DAGQ_WORKFLOW_ID/$DAGQ_TASK\" >> {log}; sleep {sleep}; "
            f"echo \"- $DAGQ_WORKFLOW_ID/$DAGQ_TASK\" >> {log}")


def most_at_once(log: Path) -> int:
    running = peak = 0
    for line in log.read_text().splitlines():
        running += 1 if line.startswith("+") else -1
        peak = max(peak, running)
    return peak


def keyed_wf(name: str, log: Path, n: int = 4, limit: int = 2) -> WorkflowDef:
    return WorkflowDef(name, tuple(TaskDef(f"t{i}", {"cmd": logged(log)}) for i in range(n)),
                       params={"dataset": "x"},
                       concurrency={"key": "{params.dataset}", "limit": limit})


def run_until(client: WorkflowClient, coord: Coordinator, workers: list[Worker],
              ids: list[str], deadline_s: float = 90.0) -> None:
    run_threads_until(
        coord, workers,
        lambda: all(client.row(i).status in TERMINAL_WORKFLOW_STATUSES for i in ids),
        lambda: {i: client.row(i).status for i in ids}, deadline_s)


def test_a_key_never_runs_more_than_its_limit_across_workflows(
        backend: Backend, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    client = WorkflowClient(backend)
    ids = [client.submit(keyed_wf(f"wf{k}", log)).id for k in range(2)]
    coord = Coordinator(backend, FAST, children=client)
    worker = Worker(backend, FAST, "default", concurrency=6, log_dir=tmp_path / "logs")
    run_until(client, coord, [worker], ids)
    assert [client.row(i).status for i in ids] == ["completed", "completed"]
    assert len(log.read_text().splitlines()) == 16
    assert most_at_once(log) == 2  # the limit, reached and never passed
    value, _ = slot_records.read(backend.records, "dataset=x")
    assert value["holders"] == {} and value["waiting"] == {}


def test_a_waiting_attempt_is_explained_and_sent_when_a_slot_frees(
        backend: Backend, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    client = WorkflowClient(backend)
    first = client.submit(keyed_wf("a", log, n=1, limit=1)).id
    second = client.submit(keyed_wf("b", log, n=1, limit=1)).id
    coord = Coordinator(backend, FAST, children=client)
    while coord.step():
        pass
    queue = backend.queues.get("default")
    assert queue.approximate_count() == 1  # one message: the other waits for the slot
    rows = {wf: explanations(backend, client.state(wf), time.time())[0]
            for wf in (first, second)}
    waiting = [r for r in rows.values() if r["phase"] == "held"]
    assert len(waiting) == 1
    holder = next(f"{wf}/t0/1" for wf, r in rows.items() if r["phase"] != "held")
    assert waiting[0]["reasons"][0] == (f"waiting for key dataset=x: 1 of 1 running "
                                        f"(held by {holder})")
    worker = Worker(backend, FAST, "default", concurrency=2, log_dir=tmp_path / "logs")
    run_until(client, coord, [worker], [first, second])
    assert most_at_once(log) == 1
    assert coord.stats.counts["slot_wakes"] >= 1  # sent at the release, not by a sweep


def test_the_sweep_drops_a_holder_whose_attempt_no_longer_runs(
        backend: Backend, tmp_path: Path) -> None:
    """What a coordinator killed after a worker finished but before the release leaves:
    a holder of an attempt that ended. The sweep drops it and the waiter runs."""
    log = tmp_path / "runs.log"
    client = WorkflowClient(backend)
    done = client.submit(keyed_wf("done", log, n=1, limit=1)).id
    coord = Coordinator(backend, FAST, children=client)
    worker = Worker(backend, FAST, "default", concurrency=1, log_dir=tmp_path / "logs")
    run_until(client, coord, [worker], [done])
    leaked = f"{done}/t0/1"
    assert Slots(backend.records).acquire("dataset=x", 1, leaked)  # the lost release
    second = client.submit(keyed_wf("next", log, n=1, limit=1)).id
    coord = Coordinator(backend, FAST, children=client)
    worker = Worker(backend, FAST, "default", concurrency=1, log_dir=tmp_path / "logs")
    run_until(client, coord, [worker], [second])
    assert client.row(second).status == "completed"
    value, _ = slot_records.read(backend.records, "dataset=x")
    assert leaked not in value["holders"]


def test_a_high_band_drains_before_a_low_one(backend: Backend, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    client = WorkflowClient(backend)

    def wf(name: str, priority: str) -> WorkflowDef:
        return WorkflowDef(name, tuple(TaskDef(f"{name}{i}", {"cmd": logged(log, 0.0)})
                                       for i in range(3)), priority=priority)

    low = client.submit(wf("low", "low")).id
    high = client.submit(wf("high", "high")).id
    coord = Coordinator(backend, FAST, children=client)
    while coord.step():
        pass
    assert backend.queues.get("default~high").approximate_count() == 3
    assert backend.queues.get("default~low").approximate_count() == 3
    worker = Worker(backend, FAST, "default", concurrency=1, log_dir=tmp_path / "logs")
    run_until(client, coord, [worker], [low, high])
    started = [line.split("/")[-1] for line in log.read_text().splitlines()
               if line.startswith("+")]
    assert [s[:-1] for s in started] == ["high"] * 3 + ["low"] * 3

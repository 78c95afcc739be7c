"""The sweep re-sends a task message that was lost (an attempt waiting unstarted on an
empty queue), and only then: a backlog, a worker running it or a recent dispatch are
left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagq.backends import open_backend
from dagq.client import WorkflowClient
from dagq.config import Settings
from dagq.core.model import TaskDef, WorkflowDef
from dagq.ports import Backend
from dagq.protocol.heartbeats import CLAIMS
from dagq.protocol.messages import CompletionMessage, decode_task
from dagq.runtime.coordinator import Coordinator
from dagq.worker import heartbeat

AFTER = 600.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def backend(tmp_path: Path) -> Backend:
    return open_backend(f"sqlite:{tmp_path / 'x.db'}")


def _started(backend: Backend, clock: Clock) -> tuple[Coordinator, str]:
    client = WorkflowClient(backend, clock=clock)
    wf = client.submit(WorkflowDef("lost", (TaskDef("a", {"cmd": "true"}),
                                            TaskDef("b", {"cmd": "true"})))).id
    coord = Coordinator(backend, Settings(lost_message_after=AFTER), children=client,
                        clock=clock)
    while coord.step():  # dispatches a and b
        pass
    coord.sweep(clock.now)  # clears the sent outbox entries
    return coord, wf


def _lose_all(backend: Backend) -> list[str]:
    queue = backend.queues.get("default")
    msgs = queue.receive(10, 60)
    queue.delete_many(msgs)
    return sorted(decode_task(m.body).key for m in msgs)


def test_a_lost_task_message_is_sent_again_once_its_wait_has_no_other_explanation(
        backend: Backend) -> None:
    clock = Clock()
    coord, wf = _started(backend, clock)
    keys = _lose_all(backend)
    assert len(keys) == 2
    clock.now += AFTER - 1
    coord.sweep(clock.now)  # not long enough yet
    assert backend.queues.get("default").approximate_count() == 0
    clock.now += 2
    coord.sweep(clock.now)
    queue = backend.queues.get("default")
    msgs = queue.receive(10, 60)
    assert sorted(decode_task(m.body).key for m in msgs) == keys  # same keys: claims apply
    assert coord.stats.counts["lost_resent"] == 2
    coord.sweep(clock.now + 1)  # just re-sent: not again
    assert coord.stats.counts["lost_resent"] == 2
    completions = backend.queues.get("completions")
    for m in msgs:
        t = decode_task(m.body)
        completions.send(CompletionMessage(wf, t.task, t.attempt, True).encode())
    queue.delete_many(msgs)
    while coord.step():
        pass
    assert WorkflowClient(backend).row(wf).status == "completed"


def test_a_backlog_or_a_worker_running_it_explains_the_wait(backend: Backend) -> None:
    clock = Clock()
    coord, _ = _started(backend, clock)
    a_key, b_key = _lose_all(backend)
    backend.queues.get("default").send(b"someone else's task", message_id="other")
    clock.now += AFTER + 1
    coord.sweep(clock.now)
    assert coord.stats.counts["lost_resent"] == 0  # the queue is not empty: a backlog
    queue = backend.queues.get("default")
    queue.delete_many(queue.receive(10, 60))
    backend.records.put(heartbeat.PARTITION, "h:1:default", {
        "queue": "default", "host": "h", "pid": 1, "running": [a_key],
        "last_seen": clock.now, "started_at": 1.0, "stopped": False,
        "interval": heartbeat.INTERVAL})
    coord.sweep(clock.now)
    assert coord.stats.counts["lost_resent"] == 1  # only b: a live worker runs a
    assert [decode_task(m.body).key for m in queue.receive(10, 60)] == [b_key]


def test_a_claim_newer_than_its_workers_heartbeat_explains_the_wait(
        backend: Backend) -> None:
    # the worker claimed a (announcing it) and has not written a heartbeat since
    clock = Clock()
    coord, _ = _started(backend, clock)
    a_key, b_key = _lose_all(backend)
    clock.now += AFTER + 1
    backend.records.put(heartbeat.PARTITION, "h:1:default", {
        "queue": "default", "host": "h", "pid": 1, "running": [],
        "last_seen": clock.now - 2, "started_at": 1.0, "stopped": False,
        "interval": heartbeat.INTERVAL})
    backend.records.put(CLAIMS, a_key, {"worker": "h:1:default", "started": 1.0,
                                        "at": clock.now - 1})
    coord.sweep(clock.now)
    assert coord.stats.counts["lost_resent"] == 1  # only b: a's claim holds
    queue = backend.queues.get("default")
    assert [decode_task(m.body).key for m in queue.receive(10, 60)] == [b_key]

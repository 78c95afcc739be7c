"""Attempt claims on the embedded store's records, with a hand-moved clock: who runs, who
drops, who waits, and when a silent claimant's attempt is taken over."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dagq.backends import open_backend
from dagq.ports import Backend, Records
from dagq.worker import heartbeat
from dagq.worker.claims import PARTITION, Claims, prune

KEY = "wf/train/1"
INTERVAL = 10.0


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[Backend]:
    b = open_backend(f"sqlite:{tmp_path / 'x.db'}")
    yield b
    b.close()


def _beat(records: Records, worker: str, started: float, now: float, running: list[str],
          stopped: bool = False) -> None:
    host, pid = worker.split(":")[:2]
    records.put(heartbeat.PARTITION, worker, {
        "queue": "gpu", "host": host, "pid": int(pid), "running": running, "last_seen": now,
        "started_at": started, "stopped": stopped, "interval": INTERVAL})


def _pair(backend: Backend, clock: Clock) -> tuple[Claims, Claims]:
    a = Claims(backend.records, "h1:1:gpu", 1.0, INTERVAL, clock=clock)
    b = Claims(backend.records, "h2:2:gpu", 2.0, INTERVAL, clock=clock)
    return a, b


def _open() -> bool:
    return True


def test_first_claim_runs_and_is_one_write(backend: Backend) -> None:
    a, _ = _pair(backend, Clock())
    before = backend.stats.total
    assert a.claim(KEY, False, _open).action == "run"
    assert backend.stats.total - before == 1, backend.stats.snapshot()
    rec, _ = backend.records.get(PARTITION, KEY)
    assert rec["worker"] == "h1:1:gpu"


def test_copy_while_the_claimant_runs_it_is_hidden_then_dropped_once_finished(
        backend: Backend) -> None:
    clock = Clock()
    a, b = _pair(backend, clock)
    _beat(backend.records, a.worker_id, 1.0, clock.now - 1, [])
    assert a.claim(KEY, False, _open).action == "run"
    clock.now += 1
    _beat(backend.records, a.worker_id, 1.0, clock.now, [KEY])
    v = b.claim(KEY, False, _open)
    assert (v.action, v.hide_s) == ("hide", 3 * INTERVAL), v
    assert a.claim(KEY, True, _open).action == "hide"  # a copy reaching the claimant itself
    clock.now += 5
    _beat(backend.records, a.worker_id, 1.0, clock.now, [])  # finished: no longer listed
    assert b.claim(KEY, False, _open).action == "drop"
    assert a.claim(KEY, False, _open).action == "drop"


def test_heartbeat_older_than_the_claim_means_still_running(backend: Backend) -> None:
    clock = Clock()
    a, b = _pair(backend, clock)
    _beat(backend.records, a.worker_id, 1.0, clock.now - 2, [])
    assert a.claim(KEY, False, _open).action == "run"
    assert b.claim(KEY, False, _open).action == "hide"


def test_silent_claimant_is_taken_over_only_after_a_confirming_wait(backend: Backend) -> None:
    clock = Clock()
    a, b = _pair(backend, clock)
    _beat(backend.records, a.worker_id, 1.0, clock.now, [KEY])
    assert a.claim(KEY, False, _open).action == "run"
    clock.now += 3 * INTERVAL + 1  # a went silent (killed, or the store was out)
    assert b.claim(KEY, False, _open).action == "hide"  # no waiting allowed: look later
    waits: list[float] = []

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        clock.now += seconds
        return True

    v = b.claim(KEY, False, _open, wait)
    assert v.action == "run" and "gone" in v.reason, v
    assert waits == [3 * INTERVAL]
    assert backend.records.get(PARTITION, KEY)[0]["worker"] == b.worker_id


def test_a_claimant_that_beats_again_while_confirming_keeps_its_claim(
        backend: Backend) -> None:
    clock = Clock()
    a, b = _pair(backend, clock)
    _beat(backend.records, a.worker_id, 1.0, clock.now, [KEY])
    a.claim(KEY, False, _open)
    clock.now += 3 * INTERVAL + 1  # a store outage: a's beats failed

    def store_back(seconds: float) -> bool:
        clock.now += seconds
        _beat(backend.records, a.worker_id, 1.0, clock.now, [KEY])
        return True

    assert b.claim(KEY, False, _open, store_back).action == "hide"
    assert backend.records.get(PARTITION, KEY)[0]["worker"] == a.worker_id
    assert b.claim(KEY, False, _open, lambda s: False).action == "hide"  # shutting down


def test_stopped_or_restarted_claimant_is_taken_over_at_once_if_the_attempt_is_open(
        backend: Backend) -> None:
    clock = Clock()
    a, b = _pair(backend, clock)
    _beat(backend.records, a.worker_id, 1.0, clock.now, [KEY])
    a.claim(KEY, False, _open)
    _beat(backend.records, a.worker_id, 1.0, clock.now, [], stopped=True)
    assert b.claim(KEY, False, lambda: False).action == "drop"  # the attempt ended
    assert b.claim(KEY, False, _open).action == "run"
    # the same host and pid again (a restarted container): a new incarnation
    again = Claims(backend.records, b.worker_id, 3.0, INTERVAL, clock=clock)
    _beat(backend.records, b.worker_id, 3.0, clock.now, [])
    assert again.claim(KEY, False, _open).action == "run"


def test_given_back_claim_is_free_for_the_next_worker(backend: Backend) -> None:
    clock = Clock()
    a, b = _pair(backend, clock)
    _beat(backend.records, a.worker_id, 1.0, clock.now, [KEY])
    a.claim(KEY, False, _open)
    assert a.give_back(KEY) and a.pending() == []
    assert b.claim(KEY, False, _open).action == "run"
    assert not a.give_back(KEY) or a.pending() == []  # not a's claim any more: left alone
    assert backend.records.get(PARTITION, KEY)[0]["worker"] == b.worker_id


def test_prune_removes_old_claims_only(backend: Backend) -> None:
    backend.records.put(PARTITION, "old/t/1", {"worker": "w", "at": 10.0})
    backend.records.put(PARTITION, "new/t/1", {"worker": "w", "at": 100_000.0})
    assert prune(backend.records, 100_000.0, keep_s=3600) == 1
    assert [k for k, _ in backend.records.list(PARTITION)] == ["new/t/1"]
    backend.records.put(PARTITION, "old/t/2", {"worker": "w", "at": 10.0})
    assert prune(backend.records, 100_010.0, keep_s=3600) == 0  # swept within the hour
    backend.records.put(PARTITION, "new/t/1", {"worker": "w", "at": 103_000.0})
    assert prune(backend.records, 104_000.0, keep_s=3600) == 1  # a new day: old/t/2 goes
    assert [k for k, _ in backend.records.list(PARTITION)] == ["new/t/1"]


class _AppliedButFailed:
    """Injected fault: the create-only write is applied, then reported as failed (a
    response lost to a timeout), as a store under load can do."""

    def __init__(self, inner: Records) -> None:
        self.inner, self.armed = inner, True

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def put(self, *args: object, **kwargs: object) -> str:
        etag = self.inner.put(*args, **kwargs)  # type: ignore[arg-type]
        if self.armed:
            self.armed = False
            from dagq.errors import StoreUnavailable
            raise StoreUnavailable("injected: the answer was lost after the write")
        return etag


def test_a_claim_the_store_applied_but_did_not_confirm_still_runs_here(
        backend: Backend) -> None:
    records = _AppliedButFailed(backend.records)
    a = Claims(records, "h1:1:gpu", 1.0, INTERVAL, clock=Clock())  # type: ignore[arg-type]
    assert a.claim(KEY, False, _open).action == "hide"  # the message comes back later
    again = a.claim(KEY, False, _open)  # the claim found is this worker's own
    assert again.action == "run", again
    assert a.claim(KEY, False, _open).action == "drop"  # now it did run here
    closed = Claims(records, "h1:1:gpu", 1.0, INTERVAL, clock=Clock())  # type: ignore[arg-type]
    assert closed.claim(KEY, False, lambda: False).action == "drop"  # ended: not again


class _Flaky(_AppliedButFailed):
    """The create is applied but reported failed, and deletes fail until ``heal()``."""

    def __init__(self, inner: Records) -> None:
        super().__init__(inner)
        self.down = True

    def delete(self, *args: object, **kwargs: object) -> None:
        if self.down:
            from dagq.errors import StoreUnavailable
            raise StoreUnavailable("injected: the store is unreachable")
        self.inner.delete(*args, **kwargs)  # type: ignore[arg-type]


def test_a_claim_applied_behind_a_failed_answer_never_reads_as_finished_elsewhere(
        backend: Backend) -> None:
    # worker A's create is applied but answered with an error, so A does not run the
    # attempt; worker B later finds A's claim while A is alive and heart-beating: B must
    # not read it as "finished on A" and drop the only copy of the message
    clock = Clock()
    records = _Flaky(backend.records)
    a = Claims(records, "h1:1:gpu", 1.0, INTERVAL, clock=clock)  # type: ignore[arg-type]
    b = Claims(backend.records, "h2:2:gpu", 2.0, INTERVAL, clock=clock)
    assert a.claim(KEY, False, _open).action == "hide"
    assert a.pending() == [KEY]  # reported as running until its claim is gone
    clock.now += 5
    _beat(backend.records, a.worker_id, 1.0, clock.now, a.pending())  # what A's beat says
    assert b.claim(KEY, False, _open).action == "hide"
    records.down = False
    a.retry()  # A's next heartbeat removes its claim
    assert a.pending() == []
    clock.now += 5
    _beat(backend.records, a.worker_id, 1.0, clock.now, a.pending())
    assert b.claim(KEY, False, _open).action == "run"


def test_the_claim_is_the_announcement_a_start_writes_one_record(
        backend: Backend, tmp_path: Path) -> None:
    # no heartbeat write per attempt: the claim, written before the start check, is what
    # a cancel reads (dagq.protocol.heartbeats.executing_keys); heartbeats stay periodic
    from dagq.client import WorkflowClient
    from dagq.config import Settings
    from dagq.core.model import TaskDef, WorkflowDef
    from dagq.protocol.heartbeats import executing_keys
    from dagq.runtime.coordinator import Coordinator
    from dagq.worker.runtime import Worker

    client = WorkflowClient(backend)
    client.submit(WorkflowDef("one", (TaskDef("a", {"cmd": "true"}),)))
    coordinator = Coordinator(backend, Settings(), children=client)
    while coordinator.step():  # the submission's dispatch
        pass
    worker = Worker(backend, Settings(), "default", log_dir=tmp_path / "logs")
    worker._announce()  # as at start-up
    seen: list[set[str]] = []
    check = worker.gate.check

    def gate(task: object) -> str:  # what a cancel would read when the worker checks
        import time
        seen.append(executing_keys(backend.records, time.time(), among=[task.key]))  # type: ignore[attr-defined]
        return check(task)  # type: ignore[arg-type]

    worker.gate.check = gate  # type: ignore[method-assign]
    written: list[str] = []
    put = backend.records.put

    def recording_put(partition: str, key: str, *args: object, **kw: object) -> str:
        written.append(partition)
        return put(partition, key, *args, **kw)  # type: ignore[arg-type]

    backend.records.put = recording_put  # type: ignore[method-assign]
    (msg,) = backend.queues.get("default").receive(1, 60)
    worker._handle(msg)
    assert worker.stats["succeeded"] == 1
    assert seen == [{msg.id}]
    assert written.count(PARTITION) == 1 and heartbeat.PARTITION not in written, written

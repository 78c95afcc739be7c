"""Which attempts live workers are running, read from heartbeats and claims: a claim
announces an attempt until its claimant's next heartbeat says otherwise."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dagq.backends import open_backend
from dagq.ports import Backend
from dagq.protocol.heartbeats import CLAIMS, INTERVAL, PARTITION, claim_holds, executing_keys

KEY = "wf/train/1"
NOW = 10_000.0


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[Backend]:
    b = open_backend(f"sqlite:{tmp_path / 'x.db'}")
    yield b
    b.close()


def _beat(last_seen: float, running: list[str] | None = None, *, started: float = 1.0,
          stopped: bool = False) -> dict[str, object]:
    return {"queue": "gpu", "host": "h", "pid": 1, "running": running or [],
            "last_seen": last_seen, "started_at": started, "stopped": stopped,
            "interval": INTERVAL}


CLAIM = {"worker": "h:1:gpu", "started": 1.0, "at": NOW - 1}


@pytest.mark.parametrize(("beat", "holds"), [
    (_beat(NOW - 5), True),  # the heartbeat predates the claim: not listed yet
    (_beat(NOW - 0.5, [KEY]), True),  # a newer heartbeat lists it
    (_beat(NOW - 0.5), False),  # a newer heartbeat without it: it ended there
    (_beat(NOW - 1), True),  # the same instant counts as before
    (_beat(NOW - 5, stopped=True), False),  # the claimant stopped
    (_beat(NOW - 5, started=2.0), False),  # another incarnation: the claimant exited
    (_beat(NOW - 3 * INTERVAL - 1), False),  # silent for too long
    (None, False),  # no heartbeat at all
])
def test_a_claim_holds_while_its_claimant_is_live_and_not_past_it(
        beat: dict[str, object] | None, holds: bool) -> None:
    assert claim_holds(KEY, CLAIM, beat, NOW) is holds


def test_claims_are_read_only_for_keys_asked_about_and_not_listed(backend: Backend) -> None:
    backend.records.put(PARTITION, "h:1:gpu", _beat(NOW - 5, ["other/x/1"]))
    backend.records.put(CLAIMS, KEY, CLAIM)
    backend.records.put(CLAIMS, "wf/eval/1", {**CLAIM, "at": NOW - 30})  # ended there
    backend.records.put(CLAIMS, "wf2/train/1", CLAIM)  # another workflow, not asked
    assert executing_keys(backend.records, NOW) == {"other/x/1"}
    before = backend.stats.snapshot().get("record.list", 0)
    got = executing_keys(backend.records, NOW, among=[KEY, "wf/eval/1", "other/x/1"])
    assert got == {"other/x/1", KEY}
    assert backend.stats.snapshot()["record.list"] - before == 2  # heartbeats, wf's claims
    before = backend.stats.snapshot()["record.list"]
    assert executing_keys(backend.records, NOW, among=["other/x/1"]) == {"other/x/1"}
    assert backend.stats.snapshot()["record.list"] - before == 1  # all listed: no claims


def test_a_heartbeat_written_during_a_claim_lists_the_key(backend: Backend,
                                                           tmp_path: Path) -> None:
    # the heartbeat takes its time before it reads the running list, and a slot lists a
    # key from before its claim: a heartbeat newer than the claim cannot leave it out
    import time

    from dagq.config import Settings
    from dagq.worker.runtime import Worker

    worker = Worker(backend, Settings(), "gpu", log_dir=tmp_path / "logs")
    worker._claiming[KEY] = 1
    worker._announce()
    claim = {"worker": worker.worker_id, "started": worker.heartbeat.started_at,
             "at": time.time() - 0.001}
    beat, _ = backend.records.get(PARTITION, worker.worker_id)
    assert KEY in beat["running"]
    assert claim_holds(KEY, claim, {"id": worker.worker_id, **beat}, time.time())


def test_a_damaged_claim_or_heartbeat_holds_nothing_and_raises_nothing() -> None:
    assert not claim_holds(KEY, {**CLAIM, "at": "soon"}, _beat(NOW - 5), NOW)
    assert not claim_holds(KEY, CLAIM, {**_beat(NOW - 5), "interval": [1]}, NOW)
    assert claim_holds(KEY, {**CLAIM, "at": "soon"}, _beat(NOW - 5), NOW, damaged=True)

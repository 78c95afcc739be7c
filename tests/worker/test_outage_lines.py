"""A store outage costs the cancel poll and the heartbeat one log line each when it
starts (then one a minute), not one per round, and one line when the store is back."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dagq.backends import open_backend
from dagq.errors import StoreUnavailable
from dagq.ports import Backend
from dagq.worker.gate import Gate
from dagq.worker.heartbeat import Heartbeat


class FlakyRecords:
    """The records of ``backend``, failing with ``StoreUnavailable`` while ``down``."""

    def __init__(self, backend: Backend) -> None:
        self.inner = backend.records
        self.down = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise StoreUnavailable("the store is down (injected)")
            return attr(*args, **kwargs)
        return call


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "dagq.worker"]


def test_the_cancel_poll_logs_an_outage_once(tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    backend = open_backend(f"sqlite:{tmp_path / 'x.db'}")
    records = FlakyRecords(backend)
    backend.records = records  # type: ignore[misc]
    gate = Gate(backend, backend.queues.get("completions"), "w1", Counter())
    caplog.set_level(logging.INFO, "dagq.worker")
    records.down = True
    for _ in range(20):
        assert gate.poll([]) is False
    down = _lines(caplog)
    assert len(down) == 1 and "cancel poll" in down[0] and "injected" in down[0], down
    records.down = False
    gate.poll([])
    gate.poll([])
    back = _lines(caplog)[1:]
    assert len(back) == 1 and "available again" in back[0], back


def test_the_heartbeat_logs_an_outage_once(tmp_path: Path,
                                           caplog: pytest.LogCaptureFixture) -> None:
    backend = open_backend(f"sqlite:{tmp_path / 'x.db'}")
    records = FlakyRecords(backend)
    beat = Heartbeat(records, "host:1:default", "default")  # type: ignore[arg-type]
    caplog.set_level(logging.INFO, "dagq.worker")
    records.down = True
    assert not any(beat.beat([]) for _ in range(20))
    down = _lines(caplog)
    assert len(down) == 1 and "heartbeat of host:1:default" in down[0], down
    records.down = False
    assert beat.beat([]) and beat.beat([])
    assert len(_lines(caplog)) == 2

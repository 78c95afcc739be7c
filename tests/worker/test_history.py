"""The background writer of attempt records: batched per workflow, newest version of a
record wins, nothing lost to a store outage."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from dagq.backends import open_backend
from dagq.errors import StoreUnavailable
from dagq.ports import Backend, Records
from dagq.protocol.attempts import list_attempts
from dagq.worker.history import HistoryWriter
from tests.e2e.harness import eventually


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[Backend]:
    b = open_backend(f"sqlite:{tmp_path / 'x.db'}")
    yield b
    b.close()


def _rec(task: str, attempt: int, result: str = "succeeded") -> dict[str, Any]:
    return {"task": task, "attempt": attempt, "run_id": 1000 + attempt, "result": result,
            "ended_at": None if result == "running" else 1.0}


def test_records_are_written_in_one_request_per_workflow_and_round(backend: Backend) -> None:
    writer = HistoryWriter(backend.records, window_s=0.5).start()
    for i in range(50):
        writer.submit("wf-a", _rec(f"t{i}", 1))
    for i in range(10):
        writer.submit("wf-b", _rec(f"u{i}", 1))
    writer.submit("wf-a", _rec("t0", 2, "running"))
    writer.submit("wf-a", _rec("t0", 2, "failed"))  # replaces the running version
    writer.stop()
    assert 2 <= backend.stats.counts["record.put_many"] <= 4  # 61 records
    assert backend.stats.counts["record.put"] == 0
    history = list_attempts(backend.records, "wf-a")
    assert len(history) == 50
    assert [(r["attempt"], r["result"], r["run"]) for r in history["t0"]] == [
        (1, "succeeded", 0), (2, "failed", 0)]
    assert len(list_attempts(backend.records, "wf-b")) == 10


class FlakyRecords:
    """Records whose first ``fail`` put_many calls fail (an injected outage)."""

    def __init__(self, inner: Records, fail: int) -> None:
        self.inner, self.fail = inner, fail

    def put_many(self, partition: str, items: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        if self.fail:
            self.fail -= 1
            raise StoreUnavailable("injected outage")
        self.inner.put_many(partition, items)


def test_a_store_outage_delays_records_but_loses_none(backend: Backend) -> None:
    flaky = FlakyRecords(backend.records, fail=2)
    writer = HistoryWriter(flaky, window_s=0.05).start()  # type: ignore[arg-type]
    writer.submit("wf", _rec("a", 1, "running"))
    eventually(lambda: flaky.fail == 0 or None, "the failing writes", 10)
    writer.submit("wf", _rec("a", 1, "succeeded"))
    writer.submit("wf", _rec("b", 1))
    eventually(lambda: len(list_attempts(backend.records, "wf")) == 2 or None,
               "the records after the outage", 10)
    writer.stop()
    history = list_attempts(backend.records, "wf")
    assert history["a"][0]["result"] == "succeeded" and writer.errors == 2

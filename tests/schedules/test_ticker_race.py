"""Two tickers on one SQLite store submit each fire time once: a forced interleaving
through the ETag guard, and two threads racing over many schedules and ticks."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from dagq.backends.sqlite import SqliteBackend
from dagq.core.model import WorkflowDef
from dagq.core.schedule.policy import run_id
from dagq.ports import Records
from dagq.schedules.store import PARTITION, ScheduleStore
from dagq.schedules.ticker import Fired, Ticker, TickReport
from tests.schedules.conftest import T0, make_spec

MIDNIGHT = T0.replace(second=0)


class BeforeFirstWrite:
    """Records that run ``hook`` once, just before the first conditional schedule write
    (an injected interleaving: another ticker finishes in that gap)."""

    def __init__(self, inner: Records, hook: Callable[[], None]) -> None:
        self.inner = inner
        self.hook: Callable[[], None] | None = hook

    def get(self, partition: str, key: str) -> tuple[dict[str, Any], str]:
        return self.inner.get(partition, key)

    def put(self, partition: str, key: str, value: Mapping[str, Any],
            etag: str | None = None) -> str:
        if self.hook is not None and partition == PARTITION and etag not in (None, "*new"):
            hook, self.hook = self.hook, None
            hook()
        return self.inner.put(partition, key, value, etag)

    def delete(self, partition: str, key: str) -> None:
        self.inner.delete(partition, key)

    def list(self, partition: str, prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
        return self.inner.list(partition, prefix)


def test_the_loser_of_the_etag_race_finds_nothing_left(backend: SqliteBackend,
                                                       store: ScheduleStore,
                                                       workflow: WorkflowDef) -> None:
    store.add(make_spec("hourly"), workflow)
    now = MIDNIGHT + timedelta(hours=1, seconds=5)
    other = SqliteBackend(backend.path)
    first, second = Ticker(backend), Ticker(other)
    reports: list[TickReport] = []
    first.store.records = BeforeFirstWrite(backend.records,
                                           lambda: reports.append(second.tick(now)))
    try:
        mine = first.tick(now)
    finally:
        other.close()
    rid = run_id("hourly", MIDNIGHT + timedelta(hours=1))
    [theirs] = reports
    # Both submitted; the other ticker's submit found the run and it won the write.
    assert [(f.run_id, f.created) for f in theirs.fired] == [(rid, False)]
    assert (mine.fired, mine.races) == ([], 1)
    assert [r.id for r in backend.index.query()] == [rid]
    assert [r.run_id for r in store.get("hourly").runs] == [rid]


def _race(path: Path, ticks: list[Any], barrier: threading.Barrier,
          out: list[Fired], errors: list[str]) -> None:
    backend = SqliteBackend(path)
    try:
        ticker = Ticker(backend)
        for now in ticks:
            barrier.wait()
            report = ticker.tick(now)
            out.extend(report.fired)
            errors.extend(report.errors)
    finally:
        backend.close()


def test_two_threads_racing_submit_once_per_fire_time(db_path: Path, store: ScheduleStore,
                                                      workflow: WorkflowDef) -> None:
    names = [f"job{i}" for i in range(8)]
    for i, name in enumerate(names):
        overlap = "allow" if i % 2 else "skip"
        store.add(make_spec(name, "* * * * *", catchup="all", overlap=overlap), workflow)
    # A tick after a 3-minute gap (catch-up), then ticks every 20 seconds.
    ticks = [MIDNIGHT + timedelta(minutes=3, seconds=10)]
    ticks += [ticks[0] + timedelta(seconds=20 * k) for k in range(1, 10)]
    barrier = threading.Barrier(2)
    fired: list[list[Fired]] = [[], []]
    errors: list[str] = []
    threads = [threading.Thread(target=_race, args=(db_path, ticks, barrier, fired[k], errors))
               for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    recorded = fired[0] + fired[1]
    per_time = Counter((f.schedule, f.fire_time) for f in recorded)
    assert per_time and max(per_time.values()) == 1  # one winner per fire time
    ids = [r.id for r in store.backend.index.query()]
    assert sorted(ids) == sorted(f.run_id for f in recorded)
    assert sum(f.created for f in recorded) <= len(ids)
    for name in names:
        sched = store.get(name)
        runs = [r.fire_time for r in sched.runs]
        missed = [m.fire_time for m in sched.missed]
        assert len(set(runs)) == len(runs) and not set(runs) & set(missed)
        # every minute up to the last tick is handled exactly once, fired or missed
        expected = [MIDNIGHT + timedelta(minutes=m) for m in range(1, 7)]
        assert sorted(runs + missed) == expected, name
    allowed = [n for i, n in enumerate(names) if i % 2]
    assert all(len(store.get(n).runs) == 6 for n in allowed)

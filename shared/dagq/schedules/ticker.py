"""The schedule ticker: at each tick, fire every due schedule (``dagq scheduler`` and the
Functions timer both call ``Ticker.tick``).

Per schedule and tick: read the record (and its ETag), look up whether the latest run is
still active in the index, let ``decide_tick`` choose what fires and what is missed,
cancel the previous run if the overlap policy says so, submit each firing as workflow
``run_id(name, fire_time)``, and write the new bookkeeping under the ETag read.

Two tickers on one store are safe: both may submit the same fire time, but the id is
deterministic and the definition the same, so the second submit finds the first
(``created=False``); only one of them wins the ETag-guarded write, the other re-reads
the record and finds nothing left to do. A ticker that dies between submitting and
writing leaves the fire time due, and the next tick's submit finds the existing run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from dagq.client import WorkflowClient
from dagq.core.schedule.policy import TickDecision, decide_tick, run_id
from dagq.errors import (
    DagqError,
    IdConflict,
    PreconditionFailed,
    ScheduleNotFound,
    WorkflowFinished,
    WorkflowNotFound,
)
from dagq.ports import Backend
from dagq.schedules.store import (
    ACTIVE_STATUSES,
    MissedEntry,
    RunEntry,
    Schedule,
    ScheduleStore,
    utc_text,
)

log = logging.getLogger("dagq.scheduler")

_ATTEMPTS = 10
_DETAIL_CHARS = 500


@dataclass(frozen=True)
class Fired:
    """A fire time submitted as a run."""

    schedule: str
    fire_time: datetime
    run_id: str
    created: bool
    """False when the run already existed (another ticker, or an earlier try, made it)."""


@dataclass
class TickReport:
    """What one tick did, over every schedule."""

    now: datetime
    schedules: int = 0
    """Schedules looked at."""
    fired: list[Fired] = field(default_factory=list)
    missed: list[tuple[str, MissedEntry]] = field(default_factory=list)
    """``(schedule, entry)`` for every fire time recorded as missed."""
    cancelled: list[str] = field(default_factory=list)
    """Run ids whose cancellation was requested (overlap ``cancel_previous``)."""
    errors: list[str] = field(default_factory=list)
    """Schedules that could not be handled this tick (they stay due)."""
    races: int = 0
    """Record writes lost to another writer and redone from a fresh read."""
    next_fire: datetime | None = None
    """The earliest next fire time over all active schedules."""

    def line(self) -> str:
        """A one-line summary."""
        return (f"tick {utc_text(self.now)}: {self.schedules} schedule(s), "
                f"{len(self.fired)} run(s) submitted, {len(self.missed)} missed, "
                f"{len(self.cancelled)} cancelled, {len(self.errors)} error(s)")


class Ticker:
    """Fires due schedules of one store; ``tick(now)`` is one pass over all of them."""

    def __init__(self, backend: Backend, clock: Callable[[], float] = time.time, *,
                 tolerance_s: float = 60.0, max_catchup: int = 100) -> None:
        self.store = ScheduleStore(backend)
        self.client = WorkflowClient(backend, clock)
        self.clock = clock
        self.tolerance_s = tolerance_s
        self.max_catchup = max_catchup

    def tick(self, now: datetime | None = None) -> TickReport:
        """Handle every schedule at ``now`` (default: the clock); errors of one schedule
        are reported and do not stop the others."""
        now = datetime.fromtimestamp(self.clock(), UTC) if now is None else now
        report = TickReport(now=now.astimezone(UTC))
        for name in self.store.names():
            report.schedules += 1
            try:
                self.tick_one(name, report.now, report)
            except ScheduleNotFound:
                continue  # removed while we were at it
            except DagqError as exc:
                log.error("schedule %r: %s", name, exc)
                report.errors.append(f"schedule {name!r}: {exc}")
        return report

    def tick_one(self, name: str, now: datetime, report: TickReport) -> None:
        """Handle one schedule at ``now``, adding what happened to ``report``."""
        for _ in range(_ATTEMPTS):
            sched = self.store.get(name)
            previous = sched.last_run_id
            active = (sched.spec.overlap != "allow"
                      and self.store.run_status(previous) in ACTIVE_STATUSES)
            decision = decide_tick(sched.spec, last_fire=sched.last_fire, now=now,
                                   previous_run_active=active, tolerance_s=self.tolerance_s,
                                   max_catchup=self.max_catchup, buffered=sched.buffered,
                                   max_missed=sched.spec.history - 1)  # + 1 for the span
            if decision.next_fire is not None:
                report.next_fire = min(report.next_fire or decision.next_fire,
                                       decision.next_fire)
            if decision.handled_until is None:
                return
            cancelled = self._cancel(previous) if decision.cancel_previous and previous else []
            fired, runs, missed = self._submit(sched, decision, now)
            missed += self._missed(sched, decision)
            missed.sort(key=lambda m: m.fire_time)
            new = replace(
                sched, last_fire=decision.handled_until,
                last_run=max([r.fire_time for r in runs], default=sched.last_run),
                runs=(sched.runs + tuple(runs))[-sched.spec.history:],
                missed=sched.missed + tuple(missed), buffered=decision.buffer)
            try:
                self.store.save(new, sched.etag)
            except PreconditionFailed:
                report.races += 1
                continue
            report.fired += fired
            report.missed += [(name, m) for m in missed]
            report.cancelled += cancelled
            if missed:
                reasons = sorted({m.reason for m in missed})
                log.warning("schedule %r: %d fire time(s) missed from %s to %s (%s)", name,
                            len(missed), utc_text(missed[0].fire_time),
                            utc_text(missed[-1].fire_time), ", ".join(reasons))
            return
        raise PreconditionFailed(f"schedule {name!r}: its record kept changing during the "
                                 f"tick; it stays due for the next one")

    def _cancel(self, previous: str) -> list[str]:
        try:
            self.client.cancel(previous)
        except (WorkflowNotFound, WorkflowFinished):
            return []
        return [previous]

    def _submit(self, sched: Schedule, decision: TickDecision,
                now: datetime) -> tuple[list[Fired], list[RunEntry], list[MissedEntry]]:
        fired: list[Fired] = []
        runs: list[RunEntry] = []
        failed: list[MissedEntry] = []
        if not decision.fire:
            return fired, runs, failed
        for t in decision.fire:
            rid = run_id(sched.name, t)
            extra = {"schedule": sched.name, "fire_time": utc_text(t)}
            try:
                defn = sched.run_definition(t)
                done = self.client.submit(defn, workflow_id=rid, extra=extra)
            except (DagqError, IdConflict) as exc:
                # A rejected submission would fail again on every tick: record it as missed.
                failed.append(MissedEntry(t, "error", str(exc)[:_DETAIL_CHARS]))
                continue
            fired.append(Fired(sched.name, t, rid, done.created))
            runs.append(RunEntry(t, rid, now))
        return fired, runs, failed

    @staticmethod
    def _missed(sched: Schedule, decision: TickDecision) -> list[MissedEntry]:
        entries = [MissedEntry(t, decision.reasons.get(t, "catchup")) for t in decision.missed]
        if decision.missed_truncated and decision.missed:
            base = sched.last_fire or sched.spec.created_at
            first = sched.spec.expr.next_after(base, sched.spec.zone)
            listed = min(decision.missed)
            entries.append(MissedEntry(first, "catchup", (
                f"every fire time from {utc_text(first)} until before {utc_text(listed)} "
                f"was missed too (too many to list one by one)")))
        return entries

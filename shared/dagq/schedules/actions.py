"""Runs of a schedule started on request: ``trigger`` (run now) and ``backfill`` (every
fire time of a past range). ``dagq schedule trigger|backfill`` and the HTTP routes call
these.

Both submit through ``WorkflowClient.submit`` with ids from ``run_id(name, time)``, so
they are idempotent: a backfill repeated, or overlapping runs the ticker already
started, finds the existing runs (``created=False``) instead of starting them twice.
Neither moves the schedule's ``last_fire``; both add their runs to its history.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from dagq.client import WorkflowClient
from dagq.core.params import apply_params
from dagq.core.schedule.policy import fire_times_between, run_id
from dagq.core.validate import validate
from dagq.errors import DefinitionError
from dagq.ports import Backend
from dagq.schedules.store import RunEntry, Schedule, ScheduleStore, utc_text

MAX_BACKFILL = 1000
"""Most fire times one backfill may start."""


@dataclass(frozen=True)
class Started:
    """One run a trigger or backfill asked for."""

    fire_time: datetime
    run_id: str
    created: bool
    """False when the run already existed."""

    def to_json(self) -> dict[str, object]:
        """``{"fire_time", "run_id", "created"}``."""
        return {"fire_time": utc_text(self.fire_time), "run_id": self.run_id,
                "created": self.created}


def trigger(backend: Backend, name: str, now: datetime | None = None) -> Started:
    """Start a run of schedule ``name`` now (whole seconds, as ``{schedule.time}``),
    paused or not and whatever its overlap policy."""
    when = (datetime.now(UTC) if now is None else now.astimezone(UTC)).replace(microsecond=0)
    return _start(backend, name, [when], when)[0]


def backfill(backend: Backend, name: str, start: datetime, end: datetime,
             now: datetime | None = None) -> list[Started]:
    """Start a run for every fire time of ``name`` in ``[start, end]`` (at most
    ``MAX_BACKFILL``; ``CronError`` otherwise, before anything is submitted)."""
    sched = ScheduleStore(backend).get(name)
    times = fire_times_between(sched.spec, start, end, MAX_BACKFILL)
    return _start(backend, name, times, datetime.now(UTC) if now is None else now)


def _start(backend: Backend, name: str, times: list[datetime],
           now: datetime) -> list[Started]:
    store = ScheduleStore(backend)
    sched = store.get(name)
    client = WorkflowClient(backend)
    for t in times:  # check every run's definition first: bad input starts nothing
        problems = validate(apply_params(sched.run_definition(t)))
        if problems:
            raise DefinitionError(problems, source=f"schedule {name!r}")
    started: list[Started] = []
    for t in times:
        rid = run_id(name, t)
        done = client.submit(sched.run_definition(t), workflow_id=rid,
                             extra={"schedule": name, "fire_time": utc_text(t)})
        started.append(Started(t, rid, done.created))

    def record(s: Schedule) -> Schedule:
        known = {r.run_id for r in s.runs}
        new = tuple(RunEntry(x.fire_time, x.run_id, now) for x in started
                    if x.run_id not in known)
        return replace(s, runs=(s.runs + new)[-s.spec.history:])

    store.update(name, record)
    return started

"""Cron schedules stored as data: ``ScheduleStore`` (add, get, list, pause, resume,
remove) over the ``Records`` partition ``schedules``; the ticker lives in
``dagq.schedules.ticker``.

One record per schedule (key = name) holds the spec, the workflow definition, the last
handled fire time, the last submitted fire time, and a bounded history of runs and
missed fire times. Every change is an ETag-guarded read-modify-write, so a pause never
gets lost next to a ticker writing the same record.

Definitions whose canonical JSON is large are kept in output storage (content-addressed)
and the record holds a reference, so records stay small enough for Table Storage.
"""

from __future__ import annotations

import builtins
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from dagq.core.model import OutputRef, SubWorkflow, WorkflowDef
from dagq.core.params import apply_params
from dagq.core.parse import canonical_json, definition_from_dict, definition_to_dict
from dagq.core.paths import segment
from dagq.core.schedule.policy import ScheduleSpec, paused_times, run_id, upcoming
from dagq.core.validate import validate
from dagq.errors import (
    AlreadyExists,
    CronError,
    DefinitionError,
    NotFound,
    PreconditionFailed,
    Problem,
    ScheduleExists,
    ScheduleNotFound,
)
from dagq.ports import Backend

PARTITION = "schedules"
"""The ``Records`` partition holding one record per schedule."""
HISTORY = 50
"""Runs and missed fire times kept per schedule (the newest) unless its spec says
otherwise (``history``)."""
INLINE_DEFINITION_CHARS = 12_000
"""Canonical definitions longer than this go to output storage."""
ACTIVE_STATUSES = frozenset({"pending", "running"})
"""Workflow statuses of a run that has not ended."""
_NEW = "*new"
_CAS_ATTEMPTS = 20


@dataclass(frozen=True)
class RunEntry:
    """One submitted run of a schedule."""

    fire_time: datetime
    """The fire time it runs for (UTC)."""
    run_id: str
    """Its workflow id, ``run_id(name, fire_time)``."""
    submitted_at: datetime
    """When the ticker submitted it."""


@dataclass(frozen=True)
class MissedEntry:
    """A due fire time that did not run, and why."""

    fire_time: datetime
    """The fire time (UTC)."""
    reason: str
    """``catchup``, ``overlap``, ``superseded`` (see ``decide_tick``) or ``error``
    (the submission was rejected; ``detail`` has the message)."""
    detail: str = ""
    """Extra words: the error, or the span of older times that were missed too."""


@dataclass(frozen=True)
class Schedule:
    """A stored schedule with its bookkeeping."""

    spec: ScheduleSpec
    definition: WorkflowDef
    """The workflow each run starts (without the schedule's params merged in)."""
    last_fire: datetime | None = None
    """The latest fire time handled (fired or missed); None before the first."""
    last_run: datetime | None = None
    """The latest fire time submitted as a run."""
    runs: tuple[RunEntry, ...] = ()
    """Recent runs, oldest first (at most ``HISTORY``)."""
    missed: tuple[MissedEntry, ...] = ()
    """Recent missed fire times, oldest first (at most ``HISTORY``)."""
    missed_dropped: int = 0
    """Older entries of ``missed`` that were dropped to keep the history bounded."""
    buffered: datetime | None = None
    """``buffer_one``: the fire time waiting for the previous run to end."""
    etag: str = ""
    """ETag of the stored record this was read from."""
    stored_definition: Mapping[str, Any] = field(default_factory=dict, repr=False,
                                                 compare=False)
    """How the record holds the definition (inline or a reference), kept for writes."""

    @property
    def name(self) -> str:
        """The schedule's name."""
        return self.spec.name

    @property
    def last_run_id(self) -> str | None:
        """Workflow id of the latest run, if any."""
        return None if self.last_run is None else run_id(self.name, self.last_run)

    def run_definition(self, fire_time: datetime | None = None) -> WorkflowDef:
        """The definition a run starts: the schedule's params over the workflow's own,
        with ``{schedule.time}`` (UTC, ISO 8601) and ``{schedule.date}`` (the date in
        the schedule's time zone) in string values replaced for ``fire_time``.

        A schedule with a ``factory`` builds its definition now, by calling the factory
        with those params (``DagqError`` when it cannot be imported, raises or returns
        something invalid)."""
        if not self.spec.params and self.spec.factory is None:
            return self.definition
        params = dict(self.spec.params)
        if fire_time is not None:
            local = fire_time.astimezone(self.spec.zone)
            marks = {"{schedule.time}": utc_text(fire_time) or "",
                     "{schedule.date}": local.date().isoformat()}
            for key, value in params.items():
                if isinstance(value, str) and "{schedule." in value:
                    for mark, text in marks.items():
                        value = value.replace(mark, text)
                    params[key] = value
        if self.spec.factory is not None:
            from dagq.compose.factory import resolve_child

            return resolve_child(SubWorkflow(factory=self.spec.factory, params=params))
        return replace(self.definition, params={**self.definition.params, **params})

    def next_fires(self, now: datetime, count: int) -> list[datetime]:
        """The next ``count`` fire times after ``now`` (and after the last handled one)."""
        base = max(now, self.last_fire or self.spec.created_at)
        return upcoming(self.spec, base, count)


def utc_text(t: datetime | None) -> str | None:
    """``2026-03-29T01:00:00Z`` (or None)."""
    return None if t is None else t.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text).astimezone(UTC)


class ScheduleStore:
    """Schedules in ``backend.records`` (partition ``schedules``)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.records = backend.records

    # -- reading ---------------------------------------------------------------------
    def get(self, name: str) -> Schedule:
        """The schedule called ``name``; raises ``ScheduleNotFound``."""
        try:
            value, etag = self.records.get(PARTITION, name)
        except NotFound:
            raise ScheduleNotFound(
                f"no schedule named {name!r} (see `dagq schedule list`)") from None
        return self._decode(value, etag)

    def list(self) -> list[Schedule]:
        """Every schedule, ordered by name."""
        return [self._decode(value, "") for _, value in self.records.list(PARTITION)]

    def names(self) -> builtins.list[str]:
        """Names of every schedule, in order."""
        return [key for key, _ in self.records.list(PARTITION)]

    def run_status(self, workflow_id: str | None) -> str | None:
        """The index status of a run (None when there is no run or no such workflow)."""
        if workflow_id is None:
            return None
        try:
            return self.backend.index.get(workflow_id).status
        except NotFound:
            return None

    # -- changing --------------------------------------------------------------------
    def add(self, spec: ScheduleSpec, definition: WorkflowDef) -> Schedule:
        """Store a new schedule; raises ``ScheduleExists`` when the name is taken and
        ``DefinitionError`` when the definition cannot be stored as data."""
        self._check(spec, definition)
        try:
            data = definition_to_dict(definition)
        except ValueError as exc:
            raise DefinitionError([Problem(str(exc))], source=f"schedule {spec.name!r}") from None
        record: dict[str, Any] = {"v": 1, "spec": spec.to_record(), "last_fire": None,
                                  "last_run": None, "runs": [], "missed": []}
        stored = self._definition_fields(spec.name, definition, data)
        record.update(stored)
        try:
            etag = self.records.put(PARTITION, spec.name, record, etag=_NEW)
        except AlreadyExists:
            raise ScheduleExists(
                f"a schedule named {spec.name!r} already exists; remove it first "
                f"(`dagq schedule remove {spec.name}`) or pick another name") from None
        return Schedule(spec=spec, definition=definition, etag=etag, stored_definition=stored)

    def pause(self, name: str) -> Schedule:
        """Stop ``name`` from firing (stored, so it survives restarts)."""
        return self.update(name, lambda s: replace(s, spec=replace(s.spec, paused=True)))

    def resume(self, name: str, now: datetime | None = None) -> Schedule:
        """Let ``name`` fire again from ``now`` (default: the clock). The fire times that
        passed while it was paused are recorded as missed (reason ``paused``), whatever
        its catch-up policy; ``backfill`` runs them if they are wanted after all."""
        when = datetime.now(UTC) if now is None else now.astimezone(UTC)

        def change(s: Schedule) -> Schedule:
            if not s.spec.paused:
                return s
            keep = s.spec.history
            times, truncated = paused_times(s.spec, last_fire=s.last_fire, now=when,
                                            keep=keep)
            missed = [MissedEntry(t, "paused") for t in times]
            if truncated and times:
                missed.insert(0, MissedEntry(times[0], "paused", (
                    f"older fire times before {utc_text(times[0])} passed during the pause "
                    "too (too many to list one by one)")))
            return replace(s, spec=replace(s.spec, paused=False),
                           last_fire=max(s.last_fire or s.spec.created_at, when),
                           missed=s.missed + tuple(missed), buffered=None)

        return self.update(name, change)

    def change_spec(self, name: str, spec: ScheduleSpec,
                    definition: WorkflowDef | None = None) -> Schedule:
        """Replace the spec of ``name`` (and its definition when given) in place, keeping
        its history and last fire time; checked like ``add``."""
        if spec.name != name:
            raise CronError(f"cannot rename schedule {name!r} to {spec.name!r}; add a new one")

        def change(s: Schedule) -> Schedule:
            defn = definition or s.definition
            self._check(spec, defn)
            stored = (self._definition_fields(name, defn, definition_to_dict(defn))
                      if definition is not None else s.stored_definition)
            return replace(s, spec=spec, definition=defn, stored_definition=stored,
                           buffered=s.buffered if spec.overlap == "buffer_one" else None)

        return self.update(name, change)

    def _check(self, spec: ScheduleSpec, definition: WorkflowDef) -> None:
        problems = validate(apply_params(definition, spec.params))
        if problems:
            raise DefinitionError(problems, source=f"schedule {spec.name!r}")

    def remove(self, name: str) -> None:
        """Delete ``name``; raises ``ScheduleNotFound`` when it does not exist."""
        try:
            self.records.get(PARTITION, name)
        except NotFound:
            raise ScheduleNotFound(
                f"no schedule named {name!r} (see `dagq schedule list`)") from None
        self.records.delete(PARTITION, name)

    def update(self, name: str, change: Callable[[Schedule], Schedule]) -> Schedule:
        """Apply ``change`` to the stored schedule under its ETag, re-reading on races."""
        for _ in range(_CAS_ATTEMPTS):
            current = self.get(name)
            new = change(current)
            try:
                return self.save(new, current.etag)
            except PreconditionFailed:
                continue
        raise PreconditionFailed(f"schedule {name!r} kept changing while being updated; "
                                 f"try again")

    def save(self, schedule: Schedule, etag: str) -> Schedule:
        """Write ``schedule`` only if the stored ETag is still ``etag``
        (``PreconditionFailed`` otherwise, also when it was removed meanwhile)."""
        keep = schedule.spec.history
        value: dict[str, Any] = {
            "v": 1, **schedule.stored_definition, "spec": schedule.spec.to_record(),
            "last_fire": utc_text(schedule.last_fire), "last_run": utc_text(schedule.last_run),
            "runs": [{"fire_time": utc_text(r.fire_time), "run_id": r.run_id,
                      "submitted_at": utc_text(r.submitted_at)} for r in schedule.runs[-keep:]],
            "missed": [{"fire_time": utc_text(m.fire_time), "reason": m.reason,
                        **({"detail": m.detail} if m.detail else {})}
                       for m in schedule.missed[-keep:]],
            "missed_dropped": schedule.missed_dropped + max(len(schedule.missed) - keep, 0),
            "buffered": utc_text(schedule.buffered),
        }
        try:
            new_etag = self.records.put(PARTITION, schedule.name, value, etag=etag)
        except NotFound:
            raise PreconditionFailed(f"schedule {schedule.name!r} was removed") from None
        return replace(schedule, runs=schedule.runs[-keep:],
                       missed=schedule.missed[-keep:], etag=new_etag,
                       missed_dropped=value["missed_dropped"])

    # -- encoding --------------------------------------------------------------------
    def _definition_fields(self, name: str, defn: WorkflowDef,
                           data: dict[str, Any]) -> dict[str, Any]:
        text = canonical_json(defn)
        if len(text) <= INLINE_DEFINITION_CHARS:
            return {"definition": data}
        raw = text.encode("utf-8")
        digest = hashlib.sha256(raw).hexdigest()
        ref_name = f"schedules/{segment(name)}/{digest[:32]}.json"
        md5 = self.backend.outputs.put(ref_name, raw)
        return {"definition_ref": {"name": ref_name, "md5": md5, "size": len(raw)}}

    def _decode(self, value: Mapping[str, Any], etag: str) -> Schedule:
        spec = ScheduleSpec.from_record(value["spec"])
        try:
            data = value.get("definition")
            if data is None:
                from dagq.protocol.outputs import fetch_verified

                ref = value["definition_ref"]
                data = json.loads(fetch_verified(self.backend, OutputRef(**ref)))
            definition = definition_from_dict(data, source=f"schedule {spec.name!r}")
            return Schedule(
                spec=spec, definition=definition, last_fire=_time(value.get("last_fire")),
                last_run=_time(value.get("last_run")),
                runs=tuple(RunEntry(_req(r["fire_time"]), r["run_id"], _req(r["submitted_at"]))
                           for r in value.get("runs", [])),
                missed=tuple(MissedEntry(_req(m["fire_time"]), m["reason"], m.get("detail", ""))
                             for m in value.get("missed", [])),
                missed_dropped=int(value.get("missed_dropped", 0)),
                buffered=_time(value.get("buffered")), etag=etag,
                stored_definition={k: value[k] for k in ("definition", "definition_ref")
                                              if k in value})
        except (KeyError, TypeError, ValueError) as exc:
            raise CronError(f"the stored record of schedule {spec.name!r} is damaged "
                            f"({exc!r}); remove it and add it again") from None


def _req(text: str) -> datetime:
    t = _time(text)
    assert t is not None
    return t


def summary(store: ScheduleStore, sched: Schedule, now: datetime) -> dict[str, Any]:
    """The JSON summary ``dagq schedule list --json`` and ``GET /api/schedules`` show."""
    spec = sched.spec
    last = None
    if sched.last_run is not None:
        last = {"fire_time": utc_text(sched.last_run), "run_id": sched.last_run_id,
                "status": store.run_status(sched.last_run_id)}
    return {
        "name": spec.name, "cron": spec.cron, "timezone": spec.timezone,
        "overlap": spec.overlap, "catchup": spec.catchup, "params": dict(spec.params),
        "catchup_window_s": spec.catchup_window_s, "history": spec.history,
        "buffered": utc_text(sched.buffered), "paused": spec.paused,
        "workflow": sched.definition.name,
        "created_at": utc_text(spec.created_at), "last_fire": utc_text(sched.last_fire),
        "last_run": last, "missed_recorded": len(sched.missed) + sched.missed_dropped,
        "next_run": None if spec.paused else utc_text(sched.next_fires(now, 1)[0]),
    }


def detail(store: ScheduleStore, sched: Schedule, now: datetime,
           count: int = 5) -> dict[str, Any]:
    """``summary`` plus the next ``count`` fire times, recent runs (with their status),
    recent missed fire times and the definition (``dagq schedule show --json``)."""
    out = summary(store, sched, now)
    out["next_fire_times"] = [utc_text(t) for t in sched.next_fires(now, count)]
    out["runs"] = [{"fire_time": utc_text(r.fire_time), "run_id": r.run_id,
                    "submitted_at": utc_text(r.submitted_at),
                    "status": store.run_status(r.run_id)} for r in sched.runs]
    out["missed"] = [{"fire_time": utc_text(m.fire_time), "reason": m.reason,
                      **({"detail": m.detail} if m.detail else {})} for m in sched.missed]
    out["missed_not_listed"] = sched.missed_dropped
    out["definition"] = definition_to_dict(sched.definition)
    return out

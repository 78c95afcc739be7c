"""What a schedule ticker does at one tick: which fire times to submit, which to record as
missed, and the deterministic workflow id of every firing.

Pure: the caller passes ``now`` and the last handled fire time; nothing here reads a
clock or a store. All times are timezone-aware; results are aware UTC datetimes.

Per tick, the due fire times are those in ``(last_fire, now]`` (``created_at`` stands in
for ``last_fire`` before the first tick). A due time at most ``tolerance_s`` old is *on
time* and fires under every catch-up policy; older ones are *late*:

* ``none``: late times are recorded as missed.
* ``latest``: when nothing is on time, the most recent late time fires; the rest are missed.
* ``all``: the most recent ``max_catchup`` late times fire; older ones are missed.

Then the overlap policy applies to the times chosen to fire:

* ``allow``: all fire.
* ``skip``: if the previous run is still active none fire (missed, reason ``overlap``);
  otherwise only the most recent fires (the others would overlap it; reason ``superseded``).
* ``cancel_previous``: only the most recent fires (others ``superseded``) and the
  previous run, if still active, is to be cancelled.
* ``buffer_one``: while the previous run is active the most recent due time is kept
  (``buffer``) and fires as soon as that run has ended; at most one is kept, so an older
  kept time is ``superseded`` by a newer one.

The on-time window is the spec's ``catchup_window_s`` when set (like Argo's
``startingDeadlineSeconds``), else the ticker's ``tolerance_s``.

A paused schedule fires nothing and handles nothing. Resuming it records the fire times
that passed while it was paused as missed (reason ``paused``, see :func:`paused_times`)
whatever the catch-up policy: a pause means "do not run"; backfill runs them on request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any, Literal, get_args
from zoneinfo import ZoneInfo

from dagq.core.schedule.cron import CronExpr, parse_cron, parse_timezone
from dagq.errors import CronError

Overlap = Literal["skip", "allow", "cancel_previous", "buffer_one"]
Catchup = Literal["none", "latest", "all"]
MissReason = Literal["catchup", "overlap", "superseded", "paused"]
"""Why a fire time was not submitted: dropped by the catch-up policy, skipped because the
previous run was still active, replaced by a later fire time, or passed during a pause."""
MAX_HISTORY = 1000
"""Largest ``history`` a spec may ask for."""

OVERLAP_POLICIES: tuple[str, ...] = get_args(Overlap)
CATCHUP_POLICIES: tuple[str, ...] = get_args(Catchup)
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
"""Schedule names: letters, digits, ``_``, ``.``, ``-``; start with a letter or digit."""
_FACTORY = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_RUN_ID = re.compile(r"sched-(?P<name>.+)-(?P<time>\d{8}T\d{6}Z)")
_EPS = timedelta(microseconds=1)


@dataclass(frozen=True, kw_only=True)
class ScheduleSpec:
    """A stored schedule: run a workflow whenever ``cron`` fires in ``timezone``."""

    name: str
    cron: str
    """5- or 6-field expression or macro (see ``dagq.core.schedule.cron``)."""
    created_at: datetime
    """When the schedule was added; fire times after it are due."""
    timezone: str = "UTC"
    overlap: Overlap = "skip"
    catchup: Catchup = "none"
    params: Mapping[str, Any] = field(default_factory=dict)
    """Parameters passed to every run."""
    paused: bool = False
    catchup_window_s: float | None = None
    """How late a fire time may be and still count as on time; None: the ticker's."""
    history: int = 50
    """Runs and missed fire times kept in the record (the newest)."""
    factory: str | None = None
    """``module:function`` building the definition at each fire time (called with the
    run's params), instead of a stored definition."""

    def __post_init__(self) -> None:
        check_name(self.name)
        w = self.catchup_window_s
        if w is not None and (isinstance(w, bool) or not isinstance(w, int | float)
                              or not 0 <= w <= 366 * 86400):
            raise CronError(f"schedule {self.name!r}: the catch-up window must be seconds "
                            f"from 0 to 31622400, got {w!r}")
        h = self.history
        if isinstance(h, bool) or not isinstance(h, int) or not 1 <= h <= MAX_HISTORY:
            raise CronError(f"schedule {self.name!r}: history must be a whole number from 1 "
                            f"to {MAX_HISTORY}, got {h!r}")
        if self.factory is not None and (not isinstance(self.factory, str)
                                         or not _FACTORY.fullmatch(self.factory)):
            raise CronError(f"schedule {self.name!r}: the factory must look like "
                            f"'package.module:function', got {self.factory!r}")
        if self.overlap not in OVERLAP_POLICIES:
            raise CronError(f"schedule {self.name!r}: unknown overlap policy "
                            f"{self.overlap!r}; use one of {', '.join(OVERLAP_POLICIES)}")
        if self.catchup not in CATCHUP_POLICIES:
            raise CronError(f"schedule {self.name!r}: unknown catch-up policy "
                            f"{self.catchup!r}; use one of {', '.join(CATCHUP_POLICIES)}")
        object.__setattr__(self, "created_at", _utc(self.created_at, "created_at"))
        _ = self.expr, self.zone  # validate both now rather than at the first tick

    @cached_property
    def expr(self) -> CronExpr:
        """The parsed cron expression."""
        return parse_cron(self.cron)

    @cached_property
    def zone(self) -> ZoneInfo:
        """The schedule's time zone."""
        return parse_timezone(self.timezone)

    def to_record(self) -> dict[str, Any]:
        """The spec as a JSON-safe dict (``from_record`` reads it back)."""
        return {"name": self.name, "cron": self.cron, "timezone": self.timezone,
                "overlap": self.overlap, "catchup": self.catchup,
                "params": dict(self.params), "paused": self.paused,
                "created_at": self.created_at.isoformat(),
                "catchup_window_s": self.catchup_window_s, "history": self.history,
                "factory": self.factory}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ScheduleSpec:
        """Read a dict written by ``to_record``; raises ``CronError`` if it is invalid."""
        try:
            created = datetime.fromisoformat(record["created_at"])
            return cls(name=record["name"], cron=record["cron"],
                       timezone=record.get("timezone", "UTC"),
                       overlap=record.get("overlap", "skip"),
                       catchup=record.get("catchup", "none"),
                       params=dict(record.get("params", {})),
                       paused=bool(record.get("paused", False)), created_at=created,
                       catchup_window_s=record.get("catchup_window_s"),
                       history=record.get("history", 50), factory=record.get("factory"))
        except (KeyError, TypeError, ValueError) as exc:
            raise CronError(f"invalid schedule record {dict(record)!r}: {exc!r}") from None


@dataclass(frozen=True)
class TickDecision:
    """The outcome of one tick for one schedule."""

    fire: list[datetime]
    """Fire times to submit now (as ``run_id(name, t)``), oldest first."""
    missed: list[datetime]
    """Due fire times that will not run, oldest first; ``reasons`` says why."""
    next_fire: datetime | None
    """The first fire time after ``now`` (None while paused)."""
    cancel_previous: bool = False
    """True when the still-active previous run must be cancelled."""
    reasons: Mapping[datetime, MissReason] = field(default_factory=dict)
    """The reason for every time in ``missed``."""
    missed_truncated: bool = False
    """True when more (older) fire times were missed for the catch-up policy than
    ``missed`` lists; they lie between the previous ``last_fire`` and ``missed[0]``."""
    buffer: datetime | None = None
    """``buffer_one``: the fire time kept to run once the previous run has ended."""

    @property
    def handled_until(self) -> datetime | None:
        """The new ``last_fire`` to store (the latest fired, missed or kept time), or None
        when this tick handled nothing."""
        kept = [self.buffer] if self.buffer is not None else []
        return max(self.fire + self.missed + kept, default=None)


def decide_tick(spec: ScheduleSpec, *, last_fire: datetime | None, now: datetime,
                previous_run_active: bool, max_catchup: int = 100,
                tolerance_s: float = 60.0, max_missed: int = 1000,
                buffered: datetime | None = None) -> TickDecision:
    """Decide what the ticker does at ``now`` (see the module docstring for the rules).

    ``last_fire`` is the ``handled_until`` of the previous tick (None before the first);
    ``previous_run_active`` tells whether the schedule's latest run is still running;
    ``buffered`` is the time ``buffer_one`` kept at an earlier tick.
    At most ``max_missed`` missed times are listed (``missed_truncated`` flags the rest).
    """
    if max_catchup < 1 or max_missed < 0 or tolerance_s < 0:
        raise ValueError("max_catchup must be >= 1, max_missed and tolerance_s >= 0")
    now = _utc(now, "now")
    if spec.paused:
        return TickDecision(fire=[], missed=[], next_fire=None)
    if spec.catchup_window_s is not None:
        tolerance_s = spec.catchup_window_s
    base = spec.created_at if last_fire is None else _utc(last_fire, "last_fire")
    expr, zone = spec.expr, spec.zone
    cut = max(base, now - timedelta(seconds=tolerance_s) - _EPS)
    on_time = _times_in(expr, zone, cut, now)
    late_fires = {"none": 0, "latest": 0 if on_time else 1, "all": max_catchup}[spec.catchup]
    late, truncated = _latest_times(expr, zone, base, cut, late_fires + max_missed)
    split = max(len(late) - late_fires, 0)
    fire, missed = late[split:] + on_time, late[:split]
    reasons: dict[datetime, MissReason] = dict.fromkeys(missed, "catchup")
    cancel = False
    buffer: datetime | None = None
    if spec.overlap == "buffer_one":
        kept = ([_utc(buffered, "buffered")] if buffered is not None else []) + fire
        fire, buffer = ([], kept[-1] if kept else None) if previous_run_active else (
            kept[:1], kept[-1] if len(kept) > 1 else None)
        dropped = [t for t in kept if t not in fire and t != buffer]
        reasons.update(dict.fromkeys(dropped, "superseded"))
        missed = missed + dropped
    elif fire and spec.overlap == "skip" and previous_run_active:
        reasons.update(dict.fromkeys(fire, "overlap"))
        missed, fire = missed + fire, []
    elif fire and spec.overlap != "allow":
        reasons.update(dict.fromkeys(fire[:-1], "superseded"))
        missed, fire = missed + fire[:-1], fire[-1:]
        cancel = spec.overlap == "cancel_previous" and previous_run_active
    return TickDecision(fire=fire, missed=missed, next_fire=expr.next_after(max(now, base), zone),
                        cancel_previous=cancel, reasons=reasons, missed_truncated=truncated,
                        buffer=buffer)


def paused_times(spec: ScheduleSpec, *, last_fire: datetime | None, now: datetime,
                 keep: int) -> tuple[list[datetime], bool]:
    """The fire times in ``(last_fire, now]`` that passed while ``spec`` was paused (the
    latest ``keep``) and whether older ones were left out; resuming records them as
    missed and moves ``last_fire`` to ``now``."""
    base = spec.created_at if last_fire is None else _utc(last_fire, "last_fire")
    return _latest_times(spec.expr, spec.zone, base, _utc(now, "now"), keep)


def fire_times_between(spec: ScheduleSpec, start: datetime, end: datetime,
                       limit: int) -> list[datetime]:
    """Every fire time in ``[start, end]`` (for backfills); ``CronError`` when there are
    more than ``limit``."""
    start, end = _utc(start, "from"), _utc(end, "to")
    if end < start:
        raise CronError(f"backfill range ends ({end.isoformat()}) before it starts "
                        f"({start.isoformat()})")
    times: list[datetime] = []
    for t in spec.expr.iter_after(start - _EPS, spec.zone):
        if t > end:
            return times
        times.append(t)
        if len(times) > limit:
            raise CronError(f"the range holds more than {limit} fire times of schedule "
                            f"{spec.name!r}; backfill a shorter range")
    raise AssertionError("unreachable: iter_after is endless")


def upcoming(spec: ScheduleSpec, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` fire times strictly after ``after`` (for previews)."""
    times = spec.expr.iter_after(_utc(after, "after"), spec.zone)
    return [next(times) for _ in range(count)]


def check_name(name: str) -> None:
    """Raise ``CronError`` unless ``name`` is a valid schedule name."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise CronError(f"invalid schedule name {name!r}: use 1-63 letters, digits, '_', "
                        f"'.' or '-', starting with a letter or digit")


def run_id(schedule_name: str, fire_time: datetime) -> str:
    """The workflow id of the run for ``fire_time``: ``sched-{name}-{YYYYMMDDTHHMMSSZ}``.

    The same schedule and instant always give the same id (whatever the datetime's zone),
    so two tickers racing on one store submit once. Valid as a blob name and Table key.
    """
    check_name(schedule_name)
    t = _utc(fire_time, "fire_time")
    return (f"sched-{schedule_name}-{t.year:04d}{t.month:02d}{t.day:02d}"
            f"T{t.hour:02d}{t.minute:02d}{t.second:02d}Z")


def parse_run_id(workflow_id: str) -> tuple[str, datetime] | None:
    """The schedule name and fire time of a ``run_id``, or None for other workflow ids."""
    match = _RUN_ID.fullmatch(workflow_id)
    if match is None or not NAME_PATTERN.fullmatch(match["name"]):
        return None
    return match["name"], datetime.strptime(match["time"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)


def _times_in(expr: CronExpr, zone: ZoneInfo, after: datetime,
              until: datetime) -> list[datetime]:
    """Every fire time in ``(after, until]``."""
    times: list[datetime] = []
    for t in expr.iter_after(after, zone):
        if t > until:
            return times
        times.append(t)
    raise AssertionError("unreachable: iter_after is endless")


def _latest_times(expr: CronExpr, zone: ZoneInfo, after: datetime, until: datetime,
                  keep: int) -> tuple[list[datetime], bool]:
    """The last ``keep`` fire times in ``(after, until]`` and whether earlier ones exist.

    Looks back over a window that grows fourfold until it holds ``keep`` times, so a
    long outage costs about as much as the times kept, not as all the times missed.
    """
    if until <= after:
        return [], False
    span = timedelta(minutes=1)
    while True:
        lo = after if until - after <= span else until - span
        times = _times_in(expr, zone, lo, until)
        if len(times) >= keep or lo == after:
            break
        span *= 4
    kept = times[max(len(times) - keep, 0):] if keep else []
    if len(times) > keep:
        return kept, True
    return kept, lo > after and expr.next_after(after, zone) <= lo


def _utc(t: datetime, what: str) -> datetime:
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"{what} {t.isoformat()} must be timezone-aware (e.g. tzinfo=UTC)")
    return t.astimezone(UTC)

"""Cron expressions: parsing (6-field seconds-first, 5-field, macros), time zones, fire times.

Pure: no clock, no I/O. Times go in as timezone-aware datetimes and come out as aware
UTC datetimes with whole seconds.

Daylight-saving rules (see ``docs/schedules.md``). Matching is done on the wall clock of
the schedule's zone; how a matching wall time maps to real instants depends on the hour
field:

* **Fixed-time expressions** (the hour field does not match all 24 hours, e.g. daily
  02:30): a wall time skipped by a spring-forward gap fires once, at the first instant
  after the gap; a wall time that occurs twice at fall-back fires once, at its first
  occurrence.
* **Every-hour expressions** (the hour field matches all 24 hours, e.g. every 15
  minutes, hourly): they follow the clock as it is shown. Skipped wall times do not
  fire and repeated wall times fire at both occurrences, so the real-time spacing of the
  runs stays regular through both transitions.

Day rule: when both day-of-month and day-of-week are restricted, a day matches if it
matches either field; when either field starts with ``*`` (or is ``?``), a day must
match both (a plain ``*`` matches every day).
"""

from __future__ import annotations

import calendar
import difflib
import re
import zoneinfo
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo

from dagq.errors import CronError

_SECOND = timedelta(seconds=1)
_MINUTE = timedelta(minutes=1)
_HOUR = timedelta(hours=1)
_DAY = timedelta(days=1)
_LAST_YEAR = 9998  # the search stops here so date arithmetic never overflows

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""Supported macros and the 5-field expressions they stand for."""

_MONTH_NAMES = {n.upper(): i for i, n in enumerate(calendar.month_abbr) if n}
_DAY_NAMES = {"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}


@dataclass(frozen=True)
class _Field:
    name: str
    lo: int
    hi: int
    names: dict[str, int] = field(default_factory=dict)
    hint: str = ""


_FIELDS = (
    _Field("second", 0, 59),
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, _MONTH_NAMES, " or a month name (JAN-DEC)"),
    _Field("day-of-week", 0, 7, _DAY_NAMES, " or a day name (SUN-SAT)"),
)
_DOM, _DOW = _FIELDS[3], _FIELDS[5]
_EXTENSION = re.compile(r"\d*L|LW|L-\d+|\d+W|\w+#\d+")  # Quartz-style day extensions


class _Bad(Exception):
    """A problem in one field; ``parse_cron`` adds the expression to the message."""


@dataclass(frozen=True)
class CronExpr:
    """A parsed cron expression; compute fire times with ``next_after``/``iter_after``."""

    source: str
    """The expression as written."""
    seconds_field: bool
    """True for the 6-field (seconds-first) form."""
    seconds: tuple[int, ...] = field(repr=False)
    minutes: tuple[int, ...] = field(repr=False)
    hours: tuple[int, ...] = field(repr=False)
    days: tuple[int, ...] = field(repr=False)
    months: tuple[int, ...] = field(repr=False)
    weekdays: tuple[int, ...] = field(repr=False)
    """Sunday is 0."""
    days_starred: bool = field(repr=False)
    """True when day-of-month or day-of-week starts with ``*`` or is ``?`` (AND rule)."""

    @property
    def every_hour(self) -> bool:
        """True when the hour field matches all 24 hours (such expressions follow the
        wall clock through DST changes; see the module docstring)."""
        return len(self.hours) == 24

    def next_after(self, t: datetime, tz: tzinfo) -> datetime:
        """The first fire time strictly after ``t``, as an aware UTC datetime.

        ``t`` must be timezone-aware; ``tz`` is the zone whose wall clock the expression
        reads (use ``parse_timezone``).
        """
        after = _as_utc(t)
        start = after.astimezone(tz).replace(tzinfo=None, fold=0, microsecond=0)
        repeat = _offset(start, tz, 0) - _offset(start, tz, 1)
        if repeat > timedelta(0):
            # ``t`` lies in a repeated hour: earlier wall times come round again after it.
            start -= repeat
        best: datetime | None = None
        local = start
        while True:
            local = self._first_match(local)
            instants = self._instants(local, tz)
            for instant in instants:
                if instant > after and (best is None or instant < best):
                    best = instant
            # The earliest instant of a wall time never decreases as wall times increase.
            if best is not None and instants and instants[0] >= best:
                return best
            local += _SECOND

    def iter_after(self, t: datetime, tz: tzinfo) -> Iterator[datetime]:
        """Every fire time strictly after ``t``, in order (an endless iterator)."""
        while True:
            t = self.next_after(t, tz)
            yield t

    def _day_ok(self, day: datetime) -> bool:
        dom = day.day in self.days
        dow = (day.weekday() + 1) % 7 in self.weekdays
        return (dom and dow) if self.days_starred else (dom or dow)

    def _first_match(self, c: datetime) -> datetime:
        """The first naive wall time at or after ``c`` that matches every field."""
        while True:
            if c.year > _LAST_YEAR:
                raise CronError(f"cron expression {self.source!r} has no fire time "
                                f"before the year {_LAST_YEAR + 1}")
            month = _next(self.months, c.month)
            if month is None:
                c = datetime(c.year + 1, self.months[0], 1)
                continue
            if month != c.month:
                c = datetime(c.year, month, 1)
            if not self._day_ok(c):
                c = datetime(c.year, c.month, c.day) + _DAY
                continue
            hour = _next(self.hours, c.hour)
            if hour is None:
                c = datetime(c.year, c.month, c.day) + _DAY
                continue
            if hour != c.hour:
                c = c.replace(hour=hour, minute=0, second=0)
            minute = _next(self.minutes, c.minute)
            if minute is None:
                c = c.replace(minute=0, second=0) + _HOUR
                continue
            if minute != c.minute:
                c = c.replace(minute=minute, second=0)
            second = _next(self.seconds, c.second)
            if second is None:
                c = c.replace(second=0) + _MINUTE
                continue
            return c.replace(second=second)

    def _instants(self, local: datetime, tz: tzinfo) -> list[datetime]:
        """The real instants at which the naive wall time ``local`` fires, in order."""
        first, second = _offset(local, tz, 0), _offset(local, tz, 1)
        early = (local - first).replace(tzinfo=UTC)
        if first == second:
            return [early]
        if first > second:  # repeated wall time (fall back)
            return [early, (local - second).replace(tzinfo=UTC)] if self.every_hour else [early]
        return [] if self.every_hour else [_gap_end(local, first, second, tz)]


def parse_cron(expr: str) -> CronExpr:
    """Parse a 6-field (seconds-first), 5-field or macro expression; raises ``CronError``."""
    source = expr
    text = expr.strip()
    if text.startswith("@"):
        macro = MACROS.get(text.lower())
        if macro is None:
            raise CronError(f"invalid cron expression {source!r}: unknown macro; use one of "
                            + ", ".join(MACROS))
        text = macro
    parts = text.split()
    if len(parts) not in (5, 6):
        raise CronError(
            f"invalid cron expression {source!r}: expected 6 fields (second minute hour "
            f"day-of-month month day-of-week) or 5 fields (minute hour day-of-month month "
            f"day-of-week), got {len(parts)}")
    seconds_field = len(parts) == 6
    if not seconds_field:
        parts.insert(0, "0")
    try:
        values = [_parse_field(p, f) for p, f in zip(parts, _FIELDS, strict=True)]
        if _starred(parts):
            _check_days_exist(values[3], values[4], parts)
    except _Bad as exc:
        raise CronError(f"invalid cron expression {source!r}: {exc}") from None
    return CronExpr(
        source=source, seconds_field=seconds_field, seconds=values[0], minutes=values[1],
        hours=values[2], days=values[3], months=values[4],
        weekdays=tuple(sorted({v % 7 for v in values[5]})), days_starred=_starred(parts))


def parse_timezone(name: str) -> zoneinfo.ZoneInfo:
    """The IANA time zone ``name`` (e.g. ``Europe/Berlin``, ``UTC``); raises ``CronError``
    naming close matches when it is unknown."""
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        pass
    known = {z.lower(): z for z in zoneinfo.available_timezones()}
    close = difflib.get_close_matches(name.lower(), list(known), n=3, cutoff=0.6)
    if name.lower() in known:
        close = [name.lower()]
    hint = f"; did you mean {' or '.join(repr(known[c]) for c in close)}?" if close else ""
    raise CronError(f"unknown time zone {name!r}{hint} (use an IANA name such as "
                    f"'Europe/Berlin', 'America/New_York' or 'UTC')")


def _parse_field(text: str, spec: _Field) -> tuple[int, ...]:
    if text == "?":
        if spec is not _DOM and spec is not _DOW:
            raise _Bad(f"{spec.name} field '?' is not allowed; '?' only fits the "
                       f"day-of-month and day-of-week fields")
        return tuple(range(spec.lo, (6 if spec is _DOW else spec.hi) + 1))
    values: set[int] = set()
    for item in text.split(","):
        if not item:
            raise _Bad(f"{spec.name} field '{text}' has an empty list item")
        values.update(_parse_item(item, text, spec))
    return tuple(sorted(values))


def _parse_item(item: str, text: str, spec: _Field) -> range:
    base, slash, step_text = item.partition("/")
    top = 6 if spec is _DOW else spec.hi  # 7 is only an alias for Sunday
    step = 1
    if slash:
        step = _number(step_text, text, spec, "step")
        if not 1 <= step <= spec.hi - spec.lo:
            raise _Bad(f"{spec.name} field '{text}': step {step} must be between 1 and "
                       f"{spec.hi - spec.lo}")
    if base == "*":
        lo, hi = spec.lo, top
    elif "-" in base:
        a, _, b = base.partition("-")
        lo, hi = _value(a, text, spec), _value(b, text, spec)
        if spec is _DOW and hi == 0 and lo > 0:
            hi = 7  # e.g. SAT-SUN
        if lo > hi:
            raise _Bad(f"{spec.name} field '{text}': range {base} goes backwards; write it "
                       f"as '{a}-{spec.hi},{spec.lo}-{b}'")
    else:
        lo = _value(base, text, spec)
        hi = top if slash else lo  # 'N/S' means from N to the end of the field, every S
    return range(lo, hi + 1, step)


def _value(token: str, text: str, spec: _Field) -> int:
    named = spec.names.get(token.upper())
    if named is not None:
        return named
    value = _number(token, text, spec, "value")
    if not spec.lo <= value <= spec.hi:
        raise _Bad(_where(spec, text, token) + f"is out of range {spec.lo}-{spec.hi}")
    return value


def _number(token: str, text: str, spec: _Field, what: str) -> int:
    if token.isascii() and token.isdigit():
        return int(token)
    problem = f"is not a number{spec.hint if what == 'value' else ''}"
    if (spec is _DOM or spec is _DOW) and _EXTENSION.fullmatch(token.upper()):
        problem += " (the L, W and # extensions are not supported)"
    if not token:
        problem = f"has an empty {what}"
    raise _Bad(_where(spec, text, token) + problem)


def _where(spec: _Field, text: str, token: str) -> str:
    if token == text or not token:
        return f"{spec.name} field '{text}' "
    return f"{spec.name} field '{text}': '{token}' "


def _check_days_exist(days: tuple[int, ...], months: tuple[int, ...],
                      parts: list[str]) -> None:
    """Reject day/month combinations that never occur (e.g. 30 February)."""
    if any(min(days) <= calendar.monthrange(2000, m)[1] for m in months):
        return
    raise _Bad(f"day-of-month field '{parts[3]}' never occurs in month field '{parts[4]}', "
               f"so the expression would never fire")


def _starred(parts: list[str]) -> bool:
    """True when the day fields combine with AND (either starts with ``*`` or is ``?``)."""
    return any(parts[i] == "?" or parts[i].startswith("*") for i in (3, 5))


def _next(values: tuple[int, ...], v: int) -> int | None:
    i = bisect_left(values, v)
    return values[i] if i < len(values) else None


def _offset(local: datetime, tz: tzinfo, fold: int) -> timedelta:
    off = local.replace(tzinfo=tz, fold=fold).utcoffset()
    if off is None:
        raise ValueError(f"time zone {tz!r} gives no UTC offset for {local}")
    return off


def _gap_end(local: datetime, before: timedelta, after: timedelta, tz: tzinfo) -> datetime:
    """The first instant after the DST gap that swallows the naive wall time ``local``."""
    lo = int((local - after).replace(tzinfo=UTC).timestamp())  # still before the gap
    hi = int((local - before).replace(tzinfo=UTC).timestamp())  # already after it
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, tz).replace(tzinfo=None) >= local:
            hi = mid
        else:
            lo = mid
    return datetime.fromtimestamp(hi, UTC)


def _as_utc(t: datetime) -> datetime:
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"time {t.isoformat()} must be timezone-aware (e.g. tzinfo=UTC)")
    return t.astimezone(UTC)

"""Cron parsing, fire times and DST behaviour (dagq.core.schedule.cron)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone, tzinfo
from itertools import islice, pairwise

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dagq.core.schedule.cron import MACROS, CronExpr, parse_cron, parse_timezone
from dagq.errors import CronError

BERLIN = parse_timezone("Europe/Berlin")
NEW_YORK = parse_timezone("America/New_York")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def fires(expr: str, start: datetime, n: int, tz: tzinfo = UTC) -> list[datetime]:
    return list(islice(parse_cron(expr).iter_after(start, tz), n))


def walls(times: list[datetime], tz: tzinfo) -> list[str]:
    return [t.astimezone(tz).strftime("%m-%d %H:%M:%S %Z") for t in times]


# --- parsing ------------------------------------------------------------------------

def test_six_field_is_seconds_first() -> None:
    expr = parse_cron("0 0 2 * * *")
    assert expr.seconds_field
    assert fires("0 0 2 * * *", utc(2026, 5, 1), 2) == [utc(2026, 5, 1, 2), utc(2026, 5, 2, 2)]
    assert fires("30 0 2 * * *", utc(2026, 5, 1), 1) == [utc(2026, 5, 1, 2, 0, 30)]


def test_five_field_has_seconds_zero() -> None:
    expr = parse_cron("0 2 * * *")
    assert not expr.seconds_field
    assert expr.seconds == (0,)
    assert fires("0 2 * * *", utc(2026, 5, 1), 3) == fires("0 0 2 * * *", utc(2026, 5, 1), 3)


@pytest.mark.parametrize(("expr", "attr", "values"), [
    ("7 * * * *", "minutes", (7,)),
    ("0 1-5 * * *", "hours", (1, 2, 3, 4, 5)),
    ("*/20 * * * *", "minutes", (0, 20, 40)),
    ("10-30/10 * * * *", "minutes", (10, 20, 30)),
    ("5/20 * * * *", "minutes", (5, 25, 45)),
    ("1,15,30 * * * *", "minutes", (1, 15, 30)),
    ("1-3,10,20-22 * * * *", "minutes", (1, 2, 3, 10, 20, 21, 22)),
    ("*/15 0 0 * * *", "seconds", (0, 15, 30, 45)),
    ("0 0 1,15,31 * *", "days", (1, 15, 31)),
    ("0 0 ? * MON", "days", tuple(range(1, 32))),
    ("0 0 1 JAN-MAR,dec *", "months", (1, 2, 3, 12)),
    ("0 0 1 */3 *", "months", (1, 4, 7, 10)),
    ("0 0 * * MON-FRI", "weekdays", (1, 2, 3, 4, 5)),
    ("0 0 * * sun,Wed", "weekdays", (0, 3)),
    ("0 0 * * 7", "weekdays", (0,)),
    ("0 0 * * 5-7", "weekdays", (0, 5, 6)),
    ("0 0 * * SAT-SUN", "weekdays", (0, 6)),
    ("0 0 * * */2", "weekdays", (0, 2, 4, 6)),
    ("0 0 1 * ?", "weekdays", tuple(range(7))),
    ("  0   0 * * *  ", "hours", (0,)),
])
def test_field_forms(expr: str, attr: str, values: tuple[int, ...]) -> None:
    assert getattr(parse_cron(expr), attr) == values


@pytest.mark.parametrize("macro", sorted(MACROS))
def test_macros_match_their_expansion(macro: str) -> None:
    start = utc(2026, 2, 27, 13, 17)
    assert fires(macro, start, 3) == fires(MACROS[macro], start, 3)
    assert fires(macro.upper(), start, 1) == fires(MACROS[macro], start, 1)


def test_macro_times() -> None:
    assert fires("@hourly", utc(2026, 1, 1, 0, 30), 1) == [utc(2026, 1, 1, 1)]
    assert fires("@weekly", utc(2026, 1, 1), 1) == [utc(2026, 1, 4)]  # a Sunday
    assert fires("@yearly", utc(2026, 1, 1), 1) == [utc(2027, 1, 1)]


@pytest.mark.parametrize(("expr", "message"), [
    ("61 * * * *", "minute field '61' is out of range 0-59"),
    ("0 0 25 * * *", "hour field '25' is out of range 0-23"),
    ("60 0 0 * * *", "second field '60' is out of range 0-59"),
    ("0 0 0 * * *  *", "expected 6 fields"),
    ("* * *", "got 3"),
    ("", "got 0"),
    ("5,61 * * * *", "minute field '5,61': '61' is out of range 0-59"),
    ("0 0 0 * *", "day-of-month field '0' is out of range 1-31"),
    ("0 0 * 13 *", "month field '13' is out of range 1-12"),
    ("0 0 * * 8", "day-of-week field '8' is out of range 0-7"),
    ("*/0 * * * *", "minute field '*/0': step 0 must be between 1 and 59"),
    ("*/60 * * * *", "step 60 must be between 1 and 59"),
    ("*/x * * * *", "minute field '*/x': 'x' is not a number"),
    ("50-10 * * * *", "minute field '50-10': range 50-10 goes backwards"),
    ("1,,2 * * * *", "minute field '1,,2' has an empty list item"),
    ("1- * * * *", "minute field '1-' has an empty value"),
    ("-5 * * * *", "minute field '-5' has an empty value"),
    ("0 0 * FOO *", "month field 'FOO' is not a number or a month name (JAN-DEC)"),
    ("0 0 * * MOM", "day-of-week field 'MOM' is not a number or a day name (SUN-SAT)"),
    ("0 0 * JAN-MON *", "month field 'JAN-MON': 'MON' is not a number or a month name"),
    ("0 0 L * *", "the L, W and # extensions are not supported"),
    ("0 0 * * MON#2", "the L, W and # extensions are not supported"),
    ("? * * * *", "minute field '?' is not allowed"),
    ("0 0 30 2 *", "day-of-month field '30' never occurs in month field '2'"),
    ("0 0 31 APR,JUN *", "never occurs"),
    ("@reboot", "unknown macro; use one of @yearly"),
    ("0 ٣ * * *", "hour field '٣' is not a number"),
])
def test_invalid_expressions_are_rejected_naming_field_and_value(expr: str, message: str) -> None:
    with pytest.raises(CronError) as info:
        parse_cron(expr)
    assert message in str(info.value)
    assert str(info.value).startswith(f"invalid cron expression {expr!r}")


def test_impossible_day_is_fine_when_day_of_week_also_restricted() -> None:
    # Both day fields restricted: OR rule, so Fridays in February still fire.
    assert fires("0 0 30 2 FRI", utc(2026, 1, 1), 1) == [utc(2026, 2, 6)]


# --- fire times ---------------------------------------------------------------------

def test_next_after_is_strictly_after_and_utc() -> None:
    expr = parse_cron("0 */10 * * * *")
    t = utc(2026, 5, 1, 12, 10)
    assert expr.next_after(t, UTC) == utc(2026, 5, 1, 12, 20)
    assert expr.next_after(t - timedelta(microseconds=1), UTC) == t
    assert expr.next_after(t + timedelta(microseconds=1), UTC) == utc(2026, 5, 1, 12, 20)
    assert expr.next_after(t, UTC).tzinfo is UTC


def test_input_zone_does_not_matter_and_naive_is_rejected() -> None:
    expr = parse_cron("0 9 * * *")
    plus5 = datetime(2026, 5, 1, 13, 0, tzinfo=timezone(timedelta(hours=5)))  # 08:00 UTC
    assert expr.next_after(plus5, UTC) == utc(2026, 5, 1, 9)
    assert expr.next_after(plus5, BERLIN) == utc(2026, 5, 2, 7)  # 09:00 CEST
    with pytest.raises(ValueError, match="timezone-aware"):
        expr.next_after(datetime(2026, 5, 1), UTC)


def test_month_ends_and_leap_years() -> None:
    assert fires("0 0 31 * *", utc(2026, 1, 31), 3) == [
        utc(2026, 3, 31), utc(2026, 5, 31), utc(2026, 7, 31)]
    assert fires("0 0 29 2 *", utc(2026, 1, 1), 2) == [utc(2028, 2, 29), utc(2032, 2, 29)]
    assert fires("59 59 23 31 12 *", utc(2026, 12, 31, 23, 59, 59), 1) == [
        utc(2027, 12, 31, 23, 59, 59)]


def test_rare_fire_times_are_found_without_scanning() -> None:
    # 2100 is not a leap year: the next 29 February after 2097 is in 2104. A per-second
    # scan would need about 2e8 steps; the field-wise search takes a handful.
    assert fires("0 0 0 29 2 *", utc(2097, 1, 1), 1, BERLIN) == [utc(2104, 2, 28, 23)]
    assert fires("0 0 0 29 2 MON", utc(2026, 3, 1), 1) == [utc(2027, 2, 1)]


def test_day_of_month_or_day_of_week_when_both_restricted() -> None:
    times = fires("0 0 13 * FRI", utc(2026, 2, 1), 4)
    # Friday 6, 13 (a Friday and the 13th, once), Friday 20 and 27 February 2026.
    assert times == [utc(2026, 2, 6), utc(2026, 2, 13), utc(2026, 2, 20), utc(2026, 2, 27)]
    times = fires("0 0 1 * MON", utc(2026, 3, 25), 3)
    assert times == [utc(2026, 3, 30), utc(2026, 4, 1), utc(2026, 4, 6)]


def test_starred_day_field_combines_with_and() -> None:
    # '*/2' starts with '*': the day must be odd AND a Monday.
    for t in fires("0 0 */2 * MON", utc(2026, 1, 1), 20):
        assert t.day % 2 == 1 and t.weekday() == 0
    assert fires("0 0 1-7 * *", utc(2026, 1, 31), 1) == [utc(2026, 2, 1)]


def test_steps_in_seconds_and_iteration() -> None:
    times = fires("*/20 * * * * *", utc(2026, 1, 1, 23, 59, 30), 4)
    assert times == [utc(2026, 1, 1, 23, 59, 40), utc(2026, 1, 2), utc(2026, 1, 2, 0, 0, 20),
                     utc(2026, 1, 2, 0, 0, 40)]


# --- time zones and DST -------------------------------------------------------------

def test_parse_timezone() -> None:
    assert parse_timezone("UTC").key == "UTC"
    with pytest.raises(CronError, match="did you mean 'Europe/Berlin'"):
        parse_timezone("europe/berlin")
    with pytest.raises(CronError, match="did you mean 'America/New_York'"):
        parse_timezone("America/NewYork")
    with pytest.raises(CronError, match="unknown time zone 'Mars/Base' \\(use an IANA"):
        parse_timezone("Mars/Base")
    for bad in ("", "../etc/passwd", "Europe"):
        with pytest.raises(CronError, match="unknown time zone"):
            parse_timezone(bad)


@pytest.mark.parametrize(("tz", "start", "expected"), [
    # Berlin, 29 March 2026: 02:00 CET jumps to 03:00 CEST; 02:30 fires at 03:00 CEST.
    (BERLIN, utc(2026, 3, 27), [utc(2026, 3, 27, 1, 30), utc(2026, 3, 28, 1, 30),
                                utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)]),
    # Berlin, 25 October 2026: 03:00 CEST falls back to 02:00 CET; 02:30 fires once, first.
    (BERLIN, utc(2026, 10, 23), [utc(2026, 10, 23, 0, 30), utc(2026, 10, 24, 0, 30),
                                 utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]),
    # New York, 8 March 2026: 02:00 EST jumps to 03:00 EDT; 02:30 fires at 03:00 EDT.
    (NEW_YORK, utc(2026, 3, 6), [utc(2026, 3, 6, 7, 30), utc(2026, 3, 7, 7, 30),
                                 utc(2026, 3, 8, 7, 0), utc(2026, 3, 9, 6, 30)]),
    # New York, 1 November 2026: 02:00 EDT falls back to 01:00 EST; 02:30 is unaffected.
    (NEW_YORK, utc(2026, 10, 30), [utc(2026, 10, 30, 6, 30), utc(2026, 10, 31, 6, 30),
                                   utc(2026, 11, 1, 7, 30), utc(2026, 11, 2, 7, 30)]),
])
def test_daily_0230_across_dst(tz: tzinfo, start: datetime, expected: list[datetime]) -> None:
    assert fires("30 2 * * *", start, 4, tz) == expected
    assert fires("0 30 2 * * *", start, 4, tz) == expected


def test_daily_0130_new_york_fall_back_fires_once_at_first_occurrence() -> None:
    times = fires("30 1 * * *", utc(2026, 10, 31, 12), 2, NEW_YORK)
    assert times == [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]  # 01:30 EDT, then EST
    # Asking from inside the repeated hour does not produce the second occurrence.
    assert parse_cron("30 1 * * *").next_after(utc(2026, 11, 1, 6, 10), NEW_YORK) == times[1]


def test_fixed_time_every_minute_in_the_gap_fires_once_after_it() -> None:
    times = fires("*/15 2 * * *", utc(2026, 3, 28, 12), 2, BERLIN)
    assert times == [utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 0)]


@pytest.mark.parametrize(("tz", "start", "repeated"), [
    (BERLIN, utc(2026, 3, 28, 23), None),
    (BERLIN, utc(2026, 10, 24, 22), "02"),
    (NEW_YORK, utc(2026, 3, 8, 5), None),
    (NEW_YORK, utc(2026, 11, 1, 3), "01"),
])
def test_every_15_minutes_is_regular_in_real_time(tz: tzinfo, start: datetime,
                                                  repeated: str | None) -> None:
    times = fires("*/15 * * * *", start, 24, tz)
    assert {b - a for a, b in pairwise(times)} == {timedelta(minutes=15)}
    labels = [w.split()[1][:5] for w in walls(times, tz)]
    if repeated is None:
        assert not any(label.startswith("02:") for label in labels)  # skipped on the clock
    else:
        assert sum(label.startswith(f"{repeated}:") for label in labels) == 8  # both passes


@pytest.mark.parametrize(("start", "expected"), [
    (utc(2026, 10, 25, 0, 50), utc(2026, 10, 25, 1, 0)),  # 02:50 CEST -> 02:00 CET
    (utc(2026, 10, 25, 1, 10), utc(2026, 10, 25, 1, 15)),  # 02:10 CET -> 02:15 CET
    (utc(2026, 10, 25, 1, 45), utc(2026, 10, 25, 2, 0)),  # 02:45 CET -> 03:00 CET
])
def test_every_15_minutes_from_inside_the_repeated_hour(start: datetime,
                                                        expected: datetime) -> None:
    assert parse_cron("0 */15 * * * *").next_after(start, BERLIN) == expected


def test_hourly_at_half_past_skips_and_repeats_with_the_clock() -> None:
    spring = fires("30 * * * *", utc(2026, 3, 28, 23), 4, BERLIN)
    assert spring == [utc(2026, 3, 28, 23, 30), utc(2026, 3, 29, 0, 30),
                      utc(2026, 3, 29, 1, 30), utc(2026, 3, 29, 2, 30)]
    fall = fires("30 * * * *", utc(2026, 10, 24, 23), 3, BERLIN)
    assert fall == [utc(2026, 10, 24, 23, 30), utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1, 30)]


def test_half_hour_dst_zone() -> None:
    lord_howe = parse_timezone("Australia/Lord_Howe")  # shifts by 30 minutes
    for start in (utc(2026, 10, 3, 14), utc(2026, 4, 4, 13)):
        times = fires("*/15 * * * *", start, 16, lord_howe)
        assert {b - a for a, b in pairwise(times)} == {timedelta(minutes=15)}


# --- agreement with a brute-force reading of the documented rules --------------------

def _brute_force(expr: CronExpr, tz: tzinfo, lo: datetime, hi: datetime) -> list[datetime]:
    """Fire times in (lo, hi), minute by minute, straight from the documented rules."""
    def matches(w: datetime) -> bool:
        dom, dow = w.day in expr.days, (w.weekday() + 1) % 7 in expr.weekdays
        day = (dom and dow) if expr.days_starred else (dom or dow)
        return (day and w.month in expr.months and w.hour in expr.hours
                and w.minute in expr.minutes)

    minute = timedelta(minutes=1)
    instants = [lo + i * minute for i in range(int((hi - lo) / minute))]
    if expr.every_hour:  # the clock as shown: each real minute whose wall time matches
        return [i for i in instants if i > lo and matches(i.astimezone(tz))]
    # The first real minute whose wall time is at or past a matching wall time; that
    # minute never moves backwards as the wall time advances, so one pointer suffices.
    pairs = [(i, i.astimezone(tz).replace(tzinfo=None)) for i in instants]
    pairs.append((hi, datetime.max))
    out, k = set(), 0
    wall = (lo - timedelta(hours=3)).astimezone(tz).replace(tzinfo=None)
    while wall < hi.astimezone(tz).replace(tzinfo=None) + timedelta(hours=3):
        if matches(wall):
            while pairs[k][1] < wall:
                k += 1
            out.add(pairs[k][0])
        wall += minute
    return sorted(i for i in out if lo < i < hi)


def _field(values: list[str]) -> st.SearchStrategy[str]:
    single = st.sampled_from(values)
    return st.one_of(st.just("*"), single, st.lists(single, min_size=2, max_size=3)
                     .map(",".join), st.sampled_from(["*/2", "*/5", "*/7", "*/15", "*/30"]))


TRANSITIONS = [(BERLIN, utc(2026, 3, 29, 1)), (BERLIN, utc(2026, 10, 25, 1)),
               (NEW_YORK, utc(2026, 3, 8, 7)), (NEW_YORK, utc(2026, 11, 1, 6))]


@pytest.mark.parametrize(("tz", "transition"), TRANSITIONS)
@settings(max_examples=25, deadline=None)
@given(minute=_field(["0", "10", "30", "45", "59", "20-40"]),
       hour=_field(["0", "1", "2", "3", "23", "1-3", "*"]),
       dom=st.sampled_from(["*", "*", "*", "1,8,25,29", "?"]),
       dow=st.sampled_from(["*", "*", "SUN", "MON-FRI", "6"]),
       offset=st.integers(min_value=-300, max_value=300))
def test_agrees_with_brute_force_around_transitions(tz: tzinfo, transition: datetime,
                                                    minute: str, hour: str, dom: str, dow: str,
                                                    offset: int) -> None:
    try:
        expr = parse_cron(f"{minute} {hour} {dom} * {dow}")
    except CronError:
        assume(False)
        return
    lo, hi = transition - timedelta(hours=20), transition + timedelta(hours=20)
    expected = _brute_force(expr, tz, lo, hi)
    got = list(islice((t for t in expr.iter_after(lo, tz)), len(expected) + 1))
    assert [t for t in got if t < hi] == expected
    probe = transition + timedelta(minutes=offset, seconds=offset % 7)
    later = [t for t in expected if t > probe]
    if later:
        assert expr.next_after(probe, tz) == later[0]

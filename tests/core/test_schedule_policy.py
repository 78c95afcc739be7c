"""Tick decisions (catch-up, overlap, pause) and run ids (dagq.core.schedule.policy)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from dagq.core.schedule.policy import (
    ScheduleSpec,
    TickDecision,
    decide_tick,
    parse_run_id,
    run_id,
    upcoming,
)
from dagq.errors import CronError

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(hours: float = 0, seconds: float = 0) -> datetime:
    return T0 + timedelta(hours=hours, seconds=seconds)


def spec(cron: str = "0 * * * *", **kw: Any) -> ScheduleSpec:
    return ScheduleSpec(name=kw.pop("name", "report"), cron=cron, created_at=T0, **kw)


def hours(*hs: int) -> list[datetime]:
    return [at(h) for h in hs]


@dataclass
class Ticker:
    """What the I/O ticker does with each decision, in memory, driven by a test clock."""

    spec: ScheduleSpec
    now: datetime = T0
    last_fire: datetime | None = None
    running: bool = False
    submitted: list[str] = field(default_factory=list)
    missed: dict[datetime, str] = field(default_factory=dict)
    cancelled: int = 0

    def tick(self, **kw: Any) -> TickDecision:
        d = decide_tick(self.spec, last_fire=self.last_fire, now=self.now,
                        previous_run_active=self.running, **kw)
        self.cancelled += d.cancel_previous
        self.submitted += [run_id(self.spec.name, t) for t in d.fire]
        self.running = (self.running and not d.cancel_previous) or bool(d.fire)
        self.missed.update(d.reasons)
        self.last_fire = d.handled_until or self.last_fire
        return d

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


# --- the spec -------------------------------------------------------------------------

@pytest.mark.parametrize(("kw", "message"), [
    ({"name": "bad name"}, "invalid schedule name 'bad name'"),
    ({"name": "a/b"}, "invalid schedule name"),
    ({"name": "-x"}, "starting with a letter or digit"),
    ({"name": "x" * 64}, "use 1-63 letters"),
    ({"overlap": "queue"}, "unknown overlap policy 'queue'; use one of skip, allow, "
                           "cancel_previous"),
    ({"catchup": "some"}, "unknown catch-up policy 'some'; use one of none, latest, all"),
    ({"timezone": "Europe/Berln"}, "did you mean 'Europe/Berlin'"),
    ({"cron": "0 25 * * *"}, "hour field '25' is out of range 0-23"),
])
def test_invalid_spec_is_rejected(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(CronError, match=re.escape(message)):
        spec(**kw)


def test_spec_needs_aware_created_at_and_round_trips() -> None:
    with pytest.raises(ValueError, match=r"created_at .* must be timezone-aware"):
        ScheduleSpec(name="x", cron="@daily", created_at=datetime(2026, 1, 1))
    s = ScheduleSpec(name="nightly.v2", cron="0 0 2 * * *", timezone="Europe/Berlin",
                     overlap="cancel_previous", catchup="all", params={"region": "eu"},
                     paused=True,
                     created_at=datetime(2026, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))))
    assert s.created_at == T0 and s.created_at.tzinfo is UTC
    assert ScheduleSpec.from_record(s.to_record()) == s
    with pytest.raises(CronError, match="invalid schedule record"):
        ScheduleSpec.from_record({"name": "x", "cron": "@daily"})


def test_upcoming_previews_in_the_schedule_zone() -> None:
    s = spec("30 2 * * *", timezone="Europe/Berlin")
    assert upcoming(s, datetime(2026, 3, 28, tzinfo=UTC), 3) == [
        datetime(2026, 3, 28, 1, 30, tzinfo=UTC), datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC)]


# --- catch-up -------------------------------------------------------------------------

def test_on_time_fire_within_tolerance_and_next_fire() -> None:
    for late in (0, 1, 59.5, 60):
        d = decide_tick(spec(), last_fire=None, now=at(1, late), previous_run_active=False)
        assert (d.fire, d.missed, d.next_fire) == (hours(1), [], at(2))
    d = decide_tick(spec(), last_fire=None, now=at(1, 60.001), previous_run_active=False)
    assert (d.fire, d.missed, dict(d.reasons)) == ([], hours(1), {at(1): "catchup"})
    d = decide_tick(spec(), last_fire=None, now=at(1, -1), previous_run_active=False)
    assert (d.fire, d.missed, d.next_fire, d.handled_until) == ([], [], at(1), None)


def test_nothing_fires_twice_or_before_creation() -> None:
    d = decide_tick(spec(), last_fire=at(1), now=at(1, 30), previous_run_active=False)
    assert (d.fire, d.missed) == ([], [])
    d = decide_tick(spec("0 0 * * * *"), last_fire=None, now=at(0, 30),
                    previous_run_active=False)  # T0 itself matches but is not after creation
    assert (d.fire, d.missed) == ([], [])


@pytest.mark.parametrize(("catchup", "fired", "missed"), [
    ("none", [5], [1, 2, 3, 4]),
    ("latest", [5], [1, 2, 3, 4]),
    ("all", [1, 2, 3, 4, 5], []),
])
def test_outage_with_an_on_time_fire(catchup: str, fired: list[int], missed: list[int]) -> None:
    d = decide_tick(spec(catchup=catchup, overlap="allow"), last_fire=None, now=at(5, 30),
                    previous_run_active=False)
    assert (d.fire, d.missed) == (hours(*fired), hours(*missed))
    assert d.handled_until == at(5) and not d.missed_truncated


@pytest.mark.parametrize(("catchup", "fired", "missed"), [
    ("none", [], [1, 2, 3, 4, 5]),
    ("latest", [5], [1, 2, 3, 4]),
    ("all", [1, 2, 3, 4, 5], []),
])
def test_outage_ending_between_fire_times(catchup: str, fired: list[int],
                                          missed: list[int]) -> None:
    d = decide_tick(spec(catchup=catchup, overlap="allow"), last_fire=None, now=at(5.5),
                    previous_run_active=False)
    assert (d.fire, d.missed, d.next_fire) == (hours(*fired), hours(*missed), at(6))
    assert set(d.reasons) == set(d.missed)


def test_catchup_all_is_capped_and_missed_list_is_bounded() -> None:
    s = spec(catchup="all", overlap="allow")
    d = decide_tick(s, last_fire=None, now=at(10.5), previous_run_active=False, max_catchup=3)
    assert d.fire == hours(8, 9, 10) and d.missed == hours(*range(1, 8))
    d = decide_tick(s, last_fire=None, now=at(10.5), previous_run_active=False, max_catchup=3,
                    max_missed=2)
    assert d.fire == hours(8, 9, 10) and d.missed == hours(6, 7) and d.missed_truncated
    d = decide_tick(s, last_fire=None, now=at(10.5), previous_run_active=False, max_catchup=3,
                    max_missed=7)
    assert len(d.missed) == 7 and not d.missed_truncated


@pytest.mark.parametrize(("max_missed", "missed", "truncated"), [
    (0, [], True), (1, [10], True), (9, list(range(2, 11)), True),
    (10, list(range(1, 11)), False), (12, list(range(1, 11)), False),
    (25, list(range(1, 11)), False),
])
def test_missed_list_keeps_the_most_recent(max_missed: int, missed: list[int],
                                           truncated: bool) -> None:
    d = decide_tick(spec(), last_fire=None, now=at(10.5), previous_run_active=False,
                    max_missed=max_missed)
    assert (d.fire, d.missed, d.missed_truncated) == ([], hours(*missed), truncated)
    # The look-back window stops short of created_at; nothing lies before it.
    d = decide_tick(spec(), last_fire=None, now=at(1, 90), previous_run_active=False,
                    max_missed=max_missed)
    assert (d.missed, d.missed_truncated) == (hours(1)[:max_missed], max_missed == 0)


def test_long_outage_of_a_per_second_schedule_stays_bounded() -> None:
    s = spec("* * * * * *", catchup="latest")
    d = decide_tick(s, last_fire=None, now=at(24 * 90), previous_run_active=False,
                    max_missed=10, tolerance_s=0)
    assert d.fire == [at(24 * 90)] and len(d.missed) == 10 and d.missed_truncated
    assert d.missed[-1] == at(24 * 90, -1)


def test_steady_ticker_fires_every_time_exactly_once() -> None:
    ticker = Ticker(spec("*/10 * * * *", overlap="allow"))
    for _ in range(3 * 60 * 2):  # two hours, ticking every 20 s
        ticker.advance(seconds=20)
        ticker.tick()
    assert len(ticker.submitted) == 12 == len(set(ticker.submitted))
    assert ticker.submitted[0] == "sched-report-20260101T001000Z" and not ticker.missed


def test_pause_then_resume_follows_the_catchup_policy() -> None:
    for catchup, fired in (("none", 1), ("latest", 2), ("all", 4)):
        ticker = Ticker(spec(catchup=catchup, overlap="allow"))
        ticker.advance(hours=1)
        ticker.tick()  # 01:00 fires
        ticker.spec = replace(ticker.spec, paused=True)
        for _ in range(3):
            ticker.advance(hours=1)
            d = ticker.tick()
            assert (d.fire, d.missed, d.next_fire) == ([], [], None)
        ticker.spec = replace(ticker.spec, paused=False)
        ticker.advance(minutes=30)  # 04:30: 02:00, 03:00 and 04:00 passed while paused
        ticker.tick()
        assert len(ticker.submitted) == fired, catchup
        assert len(ticker.missed) == 4 - fired
        assert ticker.last_fire == at(4)


# --- overlap --------------------------------------------------------------------------

def test_overlap_skip() -> None:
    s = spec(overlap="skip", catchup="all")
    d = decide_tick(s, last_fire=at(0), now=at(1), previous_run_active=True)
    assert (d.fire, d.missed, dict(d.reasons)) == ([], [at(1)], {at(1): "overlap"})
    assert d.handled_until == at(1) and not d.cancel_previous
    d = decide_tick(s, last_fire=at(0), now=at(3), previous_run_active=False)
    assert d.fire == [at(3)] and d.missed == hours(1, 2)
    assert dict(d.reasons) == {at(1): "superseded", at(2): "superseded"}


def test_overlap_allow_fires_even_when_previous_runs() -> None:
    d = decide_tick(spec(overlap="allow", catchup="all"), last_fire=at(0), now=at(3),
                    previous_run_active=True)
    assert d.fire == hours(1, 2, 3) and d.missed == [] and not d.cancel_previous


def test_overlap_cancel_previous() -> None:
    s = spec(overlap="cancel_previous")
    d = decide_tick(s, last_fire=at(0), now=at(1), previous_run_active=True)
    assert d.fire == [at(1)] and d.cancel_previous
    d = decide_tick(s, last_fire=at(0), now=at(1), previous_run_active=False)
    assert d.fire == [at(1)] and not d.cancel_previous
    d = decide_tick(s, last_fire=at(1), now=at(1, 30), previous_run_active=True)
    assert d.fire == [] and not d.cancel_previous  # nothing due: leave the run alone
    d = decide_tick(replace(s, catchup="all"), last_fire=at(0), now=at(2),
                    previous_run_active=True)
    assert (d.fire, d.missed, d.cancel_previous) == ([at(2)], [at(1)], True)


def test_ticker_with_long_runs_under_each_overlap_policy() -> None:
    outcomes = {}
    for overlap in ("skip", "allow", "cancel_previous"):
        ticker = Ticker(spec(overlap=overlap))
        for _ in range(4):
            ticker.advance(hours=1)
            ticker.tick()  # runs never finish on their own
        outcomes[overlap] = (len(ticker.submitted), len(ticker.missed), ticker.cancelled)
    assert outcomes == {"skip": (1, 3, 0), "allow": (4, 0, 0), "cancel_previous": (4, 0, 3)}


# --- run ids --------------------------------------------------------------------------

def test_run_id_is_deterministic_and_storage_safe() -> None:
    fire = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    same_instant = fire.astimezone(timezone(timedelta(hours=2)))
    assert run_id("nightly", fire) == run_id("nightly", same_instant) == \
        "sched-nightly-20260329T010000Z"
    assert run_id("nightly", fire) != run_id("nightly", fire + timedelta(seconds=1))
    assert run_id("nightly", fire) != run_id("nightly2", fire)
    rid = run_id("Daily_Report.v2-eu", fire)
    assert re.fullmatch(r"[A-Za-z0-9_.-]+", rid) and len(rid) < 256  # no / \ # ? or controls
    assert parse_run_id(rid) == ("Daily_Report.v2-eu", fire)
    assert parse_run_id("wf-123") is None and parse_run_id("sched--20260101T000000Z") is None
    with pytest.raises(CronError, match="invalid schedule name"):
        run_id("a#b", fire)
    with pytest.raises(ValueError, match="timezone-aware"):
        run_id("x", datetime(2026, 1, 1))

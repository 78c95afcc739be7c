"""Ticker with a hand-moved clock: catch-up and overlap policies, pause/resume, DST,
missed-run records and rejected submissions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dagq.backends.sqlite import SqliteBackend
from dagq.client import WorkflowClient
from dagq.core.model import TaskDef, WorkflowDef
from dagq.core.schedule.policy import run_id
from dagq.schedules.store import HISTORY, ScheduleStore
from dagq.schedules.ticker import Ticker
from tests.schedules.conftest import T0, Clock, make_spec

H = timedelta(hours=1)
MIDNIGHT = T0.replace(second=0)


def at(hours: float, seconds: float = 5) -> datetime:
    """``hours`` after midnight of T0's day, plus ``seconds``."""
    return MIDNIGHT + hours * H + timedelta(seconds=seconds)


def scheduled_ids(backend: SqliteBackend, name: str) -> list[str]:
    return [r.id for r in backend.index.query() if r.id.startswith(f"sched-{name}-")]


def finish(backend: SqliteBackend, workflow_id: str, status: str = "completed") -> None:
    backend.index.update_progress(workflow_id, status=status, counts={status: 2},
                                  updated_at=0.0)


def tick_at(ticker: Ticker, clock: Clock, when: datetime) -> object:
    clock.now = when
    return ticker.tick()  # reads the clock


def test_on_time_fire_submits_the_run_with_params_and_extras(
        backend: SqliteBackend, store: ScheduleStore, workflow: WorkflowDef,
        clock: Clock) -> None:
    store.add(make_spec("hourly", params={"region": "eu"}), workflow)
    ticker = Ticker(backend, clock.time)
    assert tick_at(ticker, clock, at(0, 50)).fired == []  # type: ignore[attr-defined]
    report = ticker.tick(at(1))
    rid = run_id("hourly", at(1, 0))
    assert [(f.run_id, f.created) for f in report.fired] == [(rid, True)]
    assert rid == "sched-hourly-20260302T010000Z"
    row = backend.index.get(rid)
    assert row.extra == {"schedule": "hourly", "fire_time": "2026-03-02T01:00:00Z"}
    state = WorkflowClient(backend).state(rid)
    assert dict(state.definition.params) == {"region": "eu", "size": 1}
    sched = store.get("hourly")
    assert (sched.last_fire, sched.last_run, sched.missed) == (at(1, 0), at(1, 0), ())
    assert [(r.run_id, r.submitted_at) for r in sched.runs] == [(rid, at(1))]
    assert report.next_fire == at(2, 0)
    assert ticker.tick(at(1, 30)).fired == []  # nothing new within the hour


def test_catchup_none_records_late_times_as_missed(backend: SqliteBackend,
                                                    store: ScheduleStore,
                                                    workflow: WorkflowDef) -> None:
    store.add(make_spec("hourly", catchup="none"), workflow)
    ticker = Ticker(backend)
    report = ticker.tick(at(5, 30 * 60))
    assert report.fired == []
    assert [(n, m.fire_time, m.reason) for n, m in report.missed] == [
        ("hourly", at(h, 0), "catchup") for h in range(1, 6)]
    assert scheduled_ids(backend, "hourly") == []
    sched = store.get("hourly")
    assert [m.fire_time for m in sched.missed] == [at(h, 0) for h in range(1, 6)]
    assert sched.last_fire == at(5, 0)
    assert [f.fire_time for f in ticker.tick(at(6)).fired] == [at(6, 0)]


def test_catchup_latest_runs_the_most_recent_late_time(backend: SqliteBackend,
                                                      store: ScheduleStore,
                                                      workflow: WorkflowDef) -> None:
    store.add(make_spec("hourly", catchup="latest"), workflow)
    report = Ticker(backend).tick(at(5, 30 * 60))
    assert [f.fire_time for f in report.fired] == [at(5, 0)]
    assert [(m.fire_time, m.reason) for _, m in report.missed] == [
        (at(h, 0), "catchup") for h in range(1, 5)]
    assert scheduled_ids(backend, "hourly") == [run_id("hourly", at(5, 0))]


def test_catchup_all_with_overlap_allow_replays_every_late_time(
        backend: SqliteBackend, store: ScheduleStore, workflow: WorkflowDef) -> None:
    store.add(make_spec("hourly", catchup="all", overlap="allow"), workflow)
    report = Ticker(backend).tick(at(5, 30 * 60))
    assert [f.fire_time for f in report.fired] == [at(h, 0) for h in range(1, 6)]
    assert report.missed == []
    assert scheduled_ids(backend, "hourly") == [run_id("hourly", at(h, 0)) for h in range(1, 6)]
    assert store.get("hourly").last_run == at(5, 0)


def test_catchup_all_with_overlap_skip_runs_one_and_records_the_rest(
        backend: SqliteBackend, store: ScheduleStore, workflow: WorkflowDef) -> None:
    store.add(make_spec("hourly", catchup="all", overlap="skip"), workflow)
    report = Ticker(backend).tick(at(5, 30 * 60))
    assert [f.fire_time for f in report.fired] == [at(5, 0)]
    assert {m.reason for _, m in report.missed} == {"superseded"}
    assert len(report.missed) == 4


def test_overlap_skip_waits_for_the_previous_run_to_end(backend: SqliteBackend,
                                                        store: ScheduleStore,
                                                        workflow: WorkflowDef) -> None:
    store.add(make_spec("hourly", overlap="skip"), workflow)
    ticker = Ticker(backend)
    first = ticker.tick(at(1)).fired[0].run_id
    report = ticker.tick(at(2))  # the 01:00 run is still pending
    assert report.fired == []
    assert [(m.fire_time, m.reason) for _, m in report.missed] == [(at(2, 0), "overlap")]
    finish(backend, first, "failed")
    assert [f.fire_time for f in ticker.tick(at(3)).fired] == [at(3, 0)]
    assert backend.index.get(first).cancel_requested is False


def test_overlap_allow_starts_alongside_an_active_run(backend: SqliteBackend,
                                                      store: ScheduleStore,
                                                      workflow: WorkflowDef) -> None:
    store.add(make_spec("hourly", overlap="allow"), workflow)
    ticker = Ticker(backend)
    ticker.tick(at(1))
    assert [f.fire_time for f in ticker.tick(at(2)).fired] == [at(2, 0)]
    assert [backend.index.get(i).status for i in scheduled_ids(backend, "hourly")] == [
        "pending", "pending"]


def test_overlap_cancel_previous_cancels_the_active_run(backend: SqliteBackend,
                                                        store: ScheduleStore,
                                                        workflow: WorkflowDef) -> None:
    store.add(make_spec("hourly", overlap="cancel_previous"), workflow)
    ticker = Ticker(backend)
    first = ticker.tick(at(1)).fired[0].run_id
    report = ticker.tick(at(2))
    assert report.cancelled == [first]
    assert backend.index.get(first).cancel_requested is True
    second = report.fired[0].run_id
    finish(backend, second)
    report = ticker.tick(at(3))  # the previous run ended: nothing to cancel
    assert report.cancelled == [] and len(report.fired) == 1
    assert backend.index.get(second).cancel_requested is False


def test_pause_holds_everything_and_resume_records_it_as_missed(backend: SqliteBackend,
                                                                store: ScheduleStore,
                                                                workflow: WorkflowDef) -> None:
    store.add(make_spec("hourly", catchup="latest"), workflow)
    store.pause("hourly")
    ticker = Ticker(backend)
    for h in (1, 2, 3):
        report = ticker.tick(at(h))
        assert (report.fired, report.missed) == ([], [])
    paused = store.get("hourly")
    assert (paused.last_fire, paused.runs, paused.missed) == (None, (), ())
    store.resume("hourly", at(3, 30 * 60))
    report = ticker.tick(at(3, 30 * 60 + 1))  # catch-up 'latest' replays nothing paused
    assert (report.fired, report.missed) == ([], [])
    assert [(m.fire_time, m.reason) for m in store.get("hourly").missed] == [
        (at(1, 0), "paused"), (at(2, 0), "paused"), (at(3, 0), "paused")]
    assert [f.fire_time for f in ticker.tick(at(4)).fired] == [at(4, 0)]


def test_pause_survives_a_new_process_and_ticker(backend: SqliteBackend,
                                                 store: ScheduleStore,
                                                 workflow: WorkflowDef) -> None:
    store.add(make_spec("hourly"), workflow)
    store.pause("hourly")
    other = SqliteBackend(backend.path)
    try:
        report = Ticker(other).tick(at(1))
    finally:
        other.close()
    assert report.schedules == 1 and report.fired == []


def test_dst_spring_forward_fires_once_after_the_gap(backend: SqliteBackend,
                                                     store: ScheduleStore,
                                                     workflow: WorkflowDef) -> None:
    created = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    store.add(make_spec("berlin", "30 2 * * *", timezone="Europe/Berlin", created_at=created),
              workflow)
    ticker = Ticker(backend)
    assert ticker.tick(datetime(2026, 3, 29, 0, 59, 59, tzinfo=UTC)).fired == []
    report = ticker.tick(datetime(2026, 3, 29, 1, 0, 5, tzinfo=UTC))  # 03:00 local
    assert [f.run_id for f in report.fired] == ["sched-berlin-20260329T010000Z"]
    assert report.next_fire == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)  # 02:30 CEST


def test_rejected_submission_is_recorded_not_retried_forever(
        backend: SqliteBackend, store: ScheduleStore, workflow: WorkflowDef) -> None:
    store.add(make_spec("hourly"), workflow)
    squatter = WorkflowDef(name="other", tasks=(TaskDef(name="x", kwargs={"cmd": "true"}),))
    WorkflowClient(backend).submit(squatter, workflow_id=run_id("hourly", at(1, 0)))
    ticker = Ticker(backend)
    report = ticker.tick(at(1))
    assert report.fired == []
    [(_, missed)] = report.missed
    assert (missed.fire_time, missed.reason) == (at(1, 0), "error")
    assert "already used by a different definition" in missed.detail
    assert store.get("hourly").missed[-1] == missed
    assert ticker.tick(at(1, 30)).missed == []  # handled once, not again


def test_a_long_outage_lists_recent_misses_and_names_the_older_span(
        backend: SqliteBackend, store: ScheduleStore, workflow: WorkflowDef) -> None:
    store.add(make_spec("minutely", "* * * * *"), workflow)
    ticker = Ticker(backend)
    report = ticker.tick(at(48))  # two days of every-minute fire times
    assert [f.fire_time for f in report.fired] == [at(48, 0)]  # on time
    missed = [m for _, m in report.missed]
    assert len(missed) == HISTORY
    assert missed[0].fire_time == at(0, 60) and "until before" in missed[0].detail
    assert "2026-03-03T23:11:00Z" in missed[0].detail
    assert [m.fire_time for m in missed[1:]] == [at(47, 60 * m) for m in range(11, 60)]
    sched = store.get("minutely")
    assert sched.missed == tuple(missed) and sched.missed_dropped == 0
    ticker.tick(at(48, 150))  # 00:01 is late, 00:02 overlaps the 00:00 run: two out
    sched = store.get("minutely")
    assert len(sched.missed) == HISTORY and sched.missed_dropped == 2


def test_one_broken_schedule_does_not_stop_the_others(backend: SqliteBackend,
                                                      store: ScheduleStore,
                                                      workflow: WorkflowDef) -> None:
    store.add(make_spec("a-broken"), workflow)
    store.add(make_spec("b-fine"), workflow)
    value, etag = store.records.get("schedules", "a-broken")
    value["last_fire"] = "yesterday"
    store.records.put("schedules", "a-broken", value, etag=etag)
    report = Ticker(backend).tick(at(1))
    assert [f.schedule for f in report.fired] == ["b-fine"]
    assert len(report.errors) == 1 and "a-broken" in report.errors[0]
    assert "1 run(s) submitted" in report.line() and "1 error(s)" in report.line()

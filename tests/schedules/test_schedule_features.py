"""Schedule features with a hand-moved clock: the fire time as a parameter, pause and
resume, the catch-up window, buffer_one, trigger, backfill, update and history."""

from __future__ import annotations

from datetime import timedelta

from dagq.backends.sqlite import SqliteBackend
from dagq.client import WorkflowClient
from dagq.core.model import WorkflowDef
from dagq.core.parse import load_definition
from dagq.core.schedule.policy import run_id
from dagq.schedules.store import ScheduleStore
from dagq.schedules.ticker import Ticker
from tests.schedules.conftest import T0, Clock, make_spec

H = timedelta(hours=1)
MIDNIGHT = T0.replace(second=0)
PARAMETERISED = load_definition("""\
name: daily-report
parameters:
  day: {type: string}
  at: {type: string}
tasks:
  - name: report
    kwargs: {cmd: "make-report --day {params.day} --at {params.at}"}
""")


def params_of(backend: SqliteBackend, workflow_id: str) -> dict[str, object]:
    return dict(WorkflowClient(backend).state(workflow_id).definition.params)


def test_the_fire_time_is_passed_as_a_parameter(backend: SqliteBackend,
                                                store: ScheduleStore, clock: Clock) -> None:
    store.add(make_spec("rep", cron="0 1 * * *", timezone="America/New_York",
                        params={"day": "{schedule.date}", "at": "{schedule.time}"}),
              PARAMETERISED)
    report = Ticker(backend, clock.time).tick(MIDNIGHT + 6 * H + timedelta(seconds=5))
    [fired] = report.fired
    assert params_of(backend, fired.run_id) == {"day": "2026-03-02",
                                                "at": "2026-03-02T06:00:00Z"}


def test_a_schedule_missing_a_required_parameter_is_refused(store: ScheduleStore,
                                                            workflow: WorkflowDef) -> None:
    import pytest

    from dagq.errors import DefinitionError

    with pytest.raises(DefinitionError, match="missing required parameter 'at'"):
        store.add(make_spec("rep", params={"day": "x"}), PARAMETERISED)
    assert run_id("rep", T0)  # the name stays free
    assert store.names() == []


def ids(backend: SqliteBackend, name: str) -> list[str]:
    return sorted(r.id for r in backend.index.query() if r.id.startswith(f"sched-{name}-"))


def finish(backend: SqliteBackend, workflow_id: str) -> None:
    backend.index.update_progress(workflow_id, status="completed", counts={"completed": 2},
                                  updated_at=0.0)


def test_resume_records_the_paused_fire_times_as_missed_and_replays_none(
        backend: SqliteBackend, store: ScheduleStore, workflow: WorkflowDef,
        clock: Clock) -> None:
    store.add(make_spec("hourly", catchup="all", overlap="allow"), workflow)
    ticker = Ticker(backend, clock.time)
    ticker.tick(MIDNIGHT + H + timedelta(seconds=5))
    assert ids(backend, "hourly") == [run_id("hourly", MIDNIGHT + H)]
    store.pause("hourly")
    assert ticker.tick(MIDNIGHT + 3 * H).fired == []
    store.resume("hourly", MIDNIGHT + 4 * H + timedelta(minutes=30))
    sched = store.get("hourly")
    assert [(m.fire_time, m.reason) for m in sched.missed] == [
        (MIDNIGHT + 2 * H, "paused"), (MIDNIGHT + 3 * H, "paused"),
        (MIDNIGHT + 4 * H, "paused")]
    assert ticker.tick(MIDNIGHT + 4 * H + timedelta(minutes=31)).fired == []  # catchup all
    report = ticker.tick(MIDNIGHT + 5 * H + timedelta(seconds=5))
    assert [f.fire_time for f in report.fired] == [MIDNIGHT + 5 * H]


def test_the_catchup_window_bounds_what_counts_as_on_time(
        backend: SqliteBackend, store: ScheduleStore, workflow: WorkflowDef,
        clock: Clock) -> None:
    every_10s = "*/10 * * * * *"
    store.add(make_spec("fixed", cron=every_10s, overlap="allow"), workflow)
    store.add(make_spec("tight", cron=every_10s, overlap="allow", catchup_window_s=5),
              workflow)
    ticker = Ticker(backend, clock.time)
    ticker.tick(T0 + timedelta(seconds=1))  # 00:00:31: nothing due yet
    report = ticker.tick(T0 + timedelta(seconds=41))  # a 40-second outage
    by = {n: [f.fire_time for f in report.fired if f.schedule == n] for n in ("fixed", "tight")}
    assert len(by["fixed"]) == 4  # the fixed 60 s window counts all four as on time
    assert by["tight"] == [MIDNIGHT + timedelta(seconds=70)]
    tight = store.get("tight")
    assert [m.reason for m in tight.missed] == ["catchup"] * 3


def test_buffer_one_keeps_the_latest_time_until_the_previous_run_ends(
        backend: SqliteBackend, store: ScheduleStore, workflow: WorkflowDef,
        clock: Clock) -> None:
    store.add(make_spec("q", overlap="buffer_one"), workflow)
    ticker = Ticker(backend, clock.time)
    first = ticker.tick(MIDNIGHT + H + timedelta(seconds=5)).fired[0].run_id
    assert ticker.tick(MIDNIGHT + 2 * H + timedelta(seconds=5)).fired == []
    assert store.get("q").buffered == MIDNIGHT + 2 * H
    assert ticker.tick(MIDNIGHT + 3 * H + timedelta(seconds=5)).fired == []
    sched = store.get("q")
    assert sched.buffered == MIDNIGHT + 3 * H  # one kept: the 02:00 run is superseded
    assert [(m.fire_time, m.reason) for m in sched.missed] == [(MIDNIGHT + 2 * H,
                                                                "superseded")]
    finish(backend, first)
    report = ticker.tick(MIDNIGHT + 3 * H + timedelta(minutes=10))
    assert [f.fire_time for f in report.fired] == [MIDNIGHT + 3 * H]
    assert store.get("q").buffered is None


def test_trigger_backfill_and_update(backend: SqliteBackend, store: ScheduleStore,
                                     workflow: WorkflowDef) -> None:
    import pytest

    from dagq.errors import CronError
    from dagq.schedules import actions

    store.add(make_spec("daily", cron="0 6 * * *", params={"region": "{schedule.date}"},
                        history=3), workflow)
    now = T0 + timedelta(minutes=10, microseconds=7)
    started = actions.trigger(backend, "daily", now)
    assert started.run_id == run_id("daily", now.replace(microsecond=0))
    assert params_of(backend, started.run_id)["region"] == "2026-03-02"
    week = [r.run_id for r in actions.backfill(backend, "daily", T0 - 7 * 24 * H, T0, now)]
    assert len(week) == 7 and week[0] == run_id("daily", MIDNIGHT - 7 * 24 * H + 6 * H)
    again = actions.backfill(backend, "daily", T0 - 7 * 24 * H, T0, now)
    assert [r.created for r in again] == [False] * 7  # idempotent run ids
    assert len(store.get("daily").runs) == 3  # history: 3
    with pytest.raises(CronError, match="more than 1000 fire times"):
        actions.backfill(backend, "daily", T0 - 3000 * 24 * H, T0, now)
    before = store.get("daily")
    changed = store.change_spec("daily", make_spec("daily", cron="0 7 * * *", history=10))
    assert (changed.spec.cron, changed.runs, changed.last_fire) == (
        "0 7 * * *", before.runs, before.last_fire)
    assert store.get("daily").spec.history == 10


def test_a_schedule_can_build_its_workflow_with_a_factory_at_each_fire_time(
        backend: SqliteBackend, store: ScheduleStore, clock: Clock) -> None:
    from dagq.schedules.store import Schedule
    from tests.schedules import factories

    spec = make_spec("fact", cron="0 1 * * *", factory="tests.schedules.factories:nightly",
                     overlap="allow",
                     params={"day": "{schedule.date}", "shards": 3})
    sample = Schedule(spec=spec, definition=WorkflowDef("", ())).run_definition(T0)
    store.add(spec, sample)
    factories.CALLS.clear()
    ticker = Ticker(backend, clock.time)
    for day in (2, 3):
        report = ticker.tick(MIDNIGHT + (24 * (day - 2) + 1) * H + timedelta(seconds=5))
        [fired] = report.fired
        defn = WorkflowClient(backend).state(fired.run_id).definition
        assert defn.name == f"nightly-2026-03-0{day}"
        assert [t.name for t in defn.tasks] == ["shard-0", "shard-1", "shard-2"]
    assert factories.CALLS == ["2026-03-02", "2026-03-03"]
    store.add(make_spec("bad", cron="0 1 * * *", factory="tests.schedules.factories:broken",
                        params={"day": "x"}, created_at=MIDNIGHT + 48 * H), sample)
    report = ticker.tick(MIDNIGHT + 49 * H + timedelta(seconds=5))
    assert [f.schedule for f in report.fired] == ["fact"]
    [miss] = store.get("bad").missed
    assert miss.reason == "error" and "no data for x" in miss.detail

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

"""ScheduleStore: add, get, list, pause, resume, remove, stored definitions and history."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from dagq.backends.sqlite import SqliteBackend
from dagq.compose.loader import load_file
from dagq.core.model import TaskDef, WorkflowDef
from dagq.errors import (
    CronError,
    DefinitionError,
    PreconditionFailed,
    ScheduleExists,
    ScheduleNotFound,
)
from dagq.schedules.store import (
    HISTORY,
    PARTITION,
    MissedEntry,
    ScheduleStore,
    detail,
    summary,
)
from tests.schedules.conftest import T0, make_spec


def test_add_then_get_round_trips_spec_and_definition(store: ScheduleStore,
                                                      workflow: WorkflowDef) -> None:
    spec = make_spec("nightly", "0 0 2 * * *", timezone="Europe/Berlin", overlap="allow",
                     catchup="latest", params={"region": "eu", "n": [1, 2]})
    store.add(spec, workflow)
    got = store.get("nightly")
    assert got.spec == spec
    assert got.definition == workflow
    assert (got.last_fire, got.last_run, got.runs, got.missed) == (None, None, (), ())
    assert got.etag
    run_def = got.run_definition()
    assert dict(run_def.params) == {"region": "eu", "size": 1, "n": [1, 2]}
    assert run_def.tasks == workflow.tasks


def test_list_is_ordered_by_name_and_names_match(store: ScheduleStore,
                                                 workflow: WorkflowDef) -> None:
    for name in ("b-job", "a-job", "c.job"):
        store.add(make_spec(name), workflow)
    assert [s.name for s in store.list()] == ["a-job", "b-job", "c.job"]
    assert store.names() == ["a-job", "b-job", "c.job"]


def test_adding_a_taken_name_is_refused_and_keeps_the_first(store: ScheduleStore,
                                                            workflow: WorkflowDef) -> None:
    store.add(make_spec("job", "0 * * * *"), workflow)
    with pytest.raises(ScheduleExists, match=r"'job' already exists.*remove"):
        store.add(make_spec("job", "*/5 * * * *"), workflow)
    assert store.get("job").spec.cron == "0 * * * *"


def test_unknown_names_raise_schedule_not_found(store: ScheduleStore) -> None:
    for action in (store.get, store.pause, store.resume, store.remove):
        with pytest.raises(ScheduleNotFound, match="no schedule named 'ghost'"):
            action("ghost")


def test_pause_and_resume_are_stored(store: ScheduleStore, workflow: WorkflowDef,
                                     db_path: Path) -> None:
    store.add(make_spec("job"), workflow)
    assert store.pause("job").spec.paused is True
    reopened = SqliteBackend(db_path)
    try:
        assert ScheduleStore(reopened).get("job").spec.paused is True
    finally:
        reopened.close()
    assert store.resume("job").spec.paused is False
    assert store.get("job").spec.paused is False


def test_remove_deletes_the_record(store: ScheduleStore, workflow: WorkflowDef) -> None:
    store.add(make_spec("job"), workflow)
    store.remove("job")
    assert store.names() == []
    with pytest.raises(ScheduleNotFound):
        store.remove("job")


def test_damaged_record_is_reported_and_can_still_be_removed(store: ScheduleStore,
                                                             workflow: WorkflowDef) -> None:
    store.add(make_spec("job"), workflow)
    value, etag = store.records.get(PARTITION, "job")
    value["definition"] = {"name": "x"}  # no tasks: not a valid definition
    store.records.put(PARTITION, "job", value, etag=etag)
    with pytest.raises(DefinitionError):
        store.get("job")
    value["definition"] = {"name": "x", "tasks": [{"name": "a", "kind": "noop"}]}
    value["runs"] = [{"fire_time": "not a time"}]
    store.records.put(PARTITION, "job", value)
    with pytest.raises(CronError, match="stored record of schedule 'job' is damaged"):
        store.get("job")
    store.remove("job")
    assert store.names() == []


def test_params_that_make_the_run_invalid_are_rejected_at_add(store: ScheduleStore,
                                                               workflow: WorkflowDef) -> None:
    with pytest.raises(DefinitionError, match=r"(?s)schedule .job.*params.ratio.*NaN"):
        store.add(make_spec("job", params={"ratio": float("nan")}), workflow)
    assert store.names() == []


def test_large_definitions_go_to_output_storage(store: ScheduleStore) -> None:
    tasks = tuple(TaskDef(name=f"t{i:04d}", kwargs={"cmd": f"echo {'x' * 40} {i}"})
                  for i in range(400))
    big = WorkflowDef(name="big", tasks=tasks)
    store.add(make_spec("big"), big)
    value, _ = store.records.get(PARTITION, "big")
    assert "definition" not in value and value["definition_ref"]["size"] > 12_000
    assert store.get("big").definition == big
    store.pause("big")  # a rewrite keeps the reference
    assert store.get("big").definition == big


def test_save_is_guarded_by_the_etag(store: ScheduleStore, workflow: WorkflowDef) -> None:
    added = store.add(make_spec("job"), workflow)
    store.pause("job")  # moves the ETag on
    with pytest.raises(PreconditionFailed):
        store.save(replace(added, last_fire=T0), added.etag)
    assert store.get("job").last_fire is None and store.get("job").spec.paused


def test_missed_history_is_bounded_and_counts_what_it_drops(store: ScheduleStore,
                                                            workflow: WorkflowDef) -> None:
    sched = store.add(make_spec("job"), workflow)
    entries = tuple(MissedEntry(T0 + timedelta(hours=i), "catchup")
                    for i in range(HISTORY + 7))
    saved = store.save(replace(sched, missed=entries), sched.etag)
    got = store.get("job")
    assert got.missed == entries[-HISTORY:] == saved.missed
    assert got.missed_dropped == 7
    info = detail(store, got, T0)
    assert info["missed_not_listed"] == 7 and len(info["missed"]) == HISTORY
    assert summary(store, got, T0)["missed_recorded"] == HISTORY + 7


def test_summary_and_detail(store: ScheduleStore, workflow: WorkflowDef) -> None:
    store.add(make_spec("nightly", "0 0 2 * * *", timezone="Europe/Berlin"), workflow)
    info = detail(store, store.get("nightly"), T0)
    assert info["next_run"] == "2026-03-02T01:00:00Z"
    assert info["next_fire_times"] == [f"2026-03-0{d}T01:00:00Z" for d in range(2, 7)]
    assert (info["last_run"], info["runs"], info["missed"]) == (None, [], [])
    assert info["definition"]["name"] == "report"
    assert summary(store, store.pause("nightly"), T0)["next_run"] is None


def test_child_workflow_files_are_stored_inline(store: ScheduleStore, tmp_path: Path) -> None:
    (tmp_path / "child.yaml").write_text(
        "name: child\ntasks:\n  - name: c\n    kwargs: {cmd: 'true'}\n")
    (tmp_path / "parent.yaml").write_text(
        "name: parent\ntasks:\n  - name: p\n    workflow: child.yaml\n")
    store.add(make_spec("nested"), load_file(tmp_path / "parent.yaml"))
    (tmp_path / "child.yaml").unlink()  # the schedule no longer needs the files
    [task] = store.get("nested").definition.tasks
    assert task.workflow is not None and task.workflow.definition is not None
    assert task.workflow.definition.tasks[0].name == "c"

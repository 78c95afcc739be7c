"""Steering a run in the pure engine: suspend and resume, retry of chosen tasks and what
follows them, and a cancel with a reason; each kept across the stored form."""

from __future__ import annotations

import pytest

from dagq.core import engine
from dagq.core.engine import Completion, WorkflowState
from dagq.core.engine.journal import encode_delta, mark_stored
from dagq.core.model import TaskDef, WorkflowDef


def chain(**wf: object) -> WorkflowDef:
    return WorkflowDef("c", (
        TaskDef("a", {"cmd": "x"}), TaskDef("b", {"cmd": "x"}, ("a",)),
        TaskDef("c", {"cmd": "x"}, ("b",)), TaskDef("side", {"cmd": "x"})), **wf)  # type: ignore[arg-type]


def statuses(s: WorkflowState) -> dict[str, str]:
    return {v.name: v.status for v in s.iter_task_views()}


def done(s: WorkflowState, *names: str, now: float = 2.0) -> engine.Effects:
    return engine.apply(s, [Completion(n, s.task_view(n).attempt, True) for n in names], now)


@pytest.mark.parametrize("cap", [None, 1])
def test_a_suspended_run_starts_nothing_until_it_is_resumed(cap: int | None) -> None:
    s = engine.create(chain(max_parallelism=cap), "wf", 0.0)
    engine.start(s, 1.0)
    assert engine.suspend(s, 1.5).changed() and s.suspended
    fx = done(s, "a")
    assert fx.dispatched == [] and statuses(s)["b"] == "ready"
    s = engine.loads(engine.dumps(s))  # kept in the stored form
    assert s.suspended
    fx = engine.unsuspend(s, 3.0)
    assert [d.task for d in fx.dispatched] == (["side"] if cap else ["b"])  # FIFO
    assert not engine.unsuspend(s, 3.5).changed()  # idempotent


def test_a_running_attempt_still_retries_while_suspended() -> None:
    s = engine.create(WorkflowDef("r", (TaskDef("a", {"cmd": "x"}, num_retries=1),)), "w", 0.0)
    engine.start(s, 1.0)
    engine.suspend(s, 1.5)
    fx = engine.apply(s, [Completion("a", 1, False, error="boom")], 2.0)
    assert [(d.task, d.attempt) for d in fx.dispatched] == [("a", 2)]


def test_suspension_travels_in_deltas_too() -> None:
    s = engine.create(chain(), "wf", 0.0)
    engine.start(s, 1.0)
    snap = engine.dumps(s)
    engine.suspend(s, 2.0)
    data = snap + encode_delta(s)
    mark_stored(s, None, 0)
    assert engine.loads(data).suspended


def test_retry_of_a_task_runs_it_and_what_follows_it_again() -> None:
    s = engine.create(chain(), "wf", 0.0)
    engine.start(s, 1.0)
    done(s, "a", "side")
    done(s, "b")
    done(s, "c")
    assert s.status == "completed"
    fx = engine.retry(s, 3.0, "r1", tasks=["b"])
    assert [(d.task, d.attempt) for d in fx.dispatched] == [("b", 2)]
    assert statuses(s) == {"a": "completed", "b": "running", "c": "pending",
                           "side": "completed"}
    assert s.status == "running"
    done(s, "b", now=4.0)
    done(s, "c", now=5.0)
    assert s.status == "completed" and s.task_view("c").attempt == 2


def test_retry_of_a_running_or_unknown_task_is_refused_and_changes_nothing() -> None:
    s = engine.create(chain(), "wf", 0.0)
    engine.start(s, 1.0)
    with pytest.raises(ValueError, match="'a' is running"):
        engine.retry(s, 2.0, "r1", tasks=["a"])
    with pytest.raises(KeyError, match="no task 'nope'"):
        engine.retry(s, 2.0, "r2", tasks=["nope"])
    assert s.retry_ids == [] and statuses(s)["a"] == "running"


def test_a_cancel_keeps_its_reason_and_a_retry_withdraws_it() -> None:
    s = engine.create(chain(), "wf", 0.0)
    engine.start(s, 1.0)
    engine.cancel(s, 2.0, reason="wrong input table")
    assert s.cancel_reason == "wrong input table"
    assert s.task_view("b").error == "cancelled: wrong input table"
    s = engine.loads(engine.dumps(s))
    assert s.cancel_reason == "wrong input table"
    engine.retry(s, 3.0, "r")
    assert s.cancel_reason is None


def test_a_finished_run_cannot_be_suspended() -> None:
    s = engine.create(WorkflowDef("o", (TaskDef("a", {"cmd": "x"}),)), "w", 0.0)
    engine.start(s, 1.0)
    done(s, "a")
    assert not engine.suspend(s, 3.0).changed() and not s.suspended


def test_a_state_of_many_tasks_is_written_as_deltas_only_where_the_store_asks() -> None:
    """A 200-task state compresses under ``MIN_SNAPSHOT_BYTES``: by size alone every write
    would encode it whole; a store whose appends cost no more than its replaces (SQLite)
    asks for deltas by task count, one whose appends cost two requests (blobs) does not."""
    from dagq.core.engine.journal import MIN_SNAPSHOT_BYTES, encode_write, mark_stored

    tasks = tuple(TaskDef(f"t{i}", {"cmd": "true"}) for i in range(200))
    s = engine.create(WorkflowDef("wide", tasks), "w", 0.0)
    engine.start(s, 0.0)
    kind, data = encode_write(s, 100)
    assert kind == "replace" and len(data) < MIN_SNAPSHOT_BYTES
    mark_stored(s, len(data))
    engine.apply(s, [Completion("t0", 1, True)], 1.0)
    assert encode_write(s, 100)[0] == "replace"
    assert encode_write(s, 100, min_tasks=64)[0] == "append"
    assert encode_write(s, 100, min_tasks=201)[0] == "replace"

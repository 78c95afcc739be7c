"""Attempts a cancel waits for that never started, and the check before an attempt starts."""

from __future__ import annotations

from dagq.core import engine
from dagq.core.engine import Completion, WorkflowState
from dagq.core.model import SubWorkflow, TaskDef, WorkflowDef

DIAMOND = WorkflowDef("t", (
    TaskDef("a"), TaskDef("b", depends_on=("a",)), TaskDef("c", depends_on=("a",)),
    TaskDef("d", depends_on=("b", "c"))))


def running_bc() -> WorkflowState:
    s = engine.create(DIAMOND, "wf", 0.0)
    engine.start(s, 0.0)
    engine.apply(s, [Completion("a", 1, True)], 1.0)
    return s


def statuses(s: WorkflowState) -> dict[str, str]:
    return {v.name: v.status for v in s.iter_task_views()}


def test_stopping_keys_are_the_dispatch_keys_a_cancel_waits_for() -> None:
    s = running_bc()
    assert engine.stopping_keys(s) == []
    engine.cancel(s, 2.0)
    assert sorted(engine.stopping_keys(s)) == ["wf/b/1", "wf/c/1"]


def test_unstarted_attempts_end_cancelled_and_the_workflow_with_them() -> None:
    s = running_bc()
    engine.cancel(s, 2.0)
    fx = engine.cancel_unstarted(s, 3.0, {"wf/b/1"})
    assert fx.transitions == [("c", "running", "cancelled")]
    assert s.task_view("c").error == "cancelled before it started"
    assert s.status == "running"
    fx = engine.cancel_unstarted(s, 4.0, set())
    assert fx.transitions == [("b", "running", "cancelled")]
    assert fx.workflow_status == ("running", "cancelled")
    # the late report of an attempt that never ran changes nothing
    assert engine.apply(s, [Completion("b", 1, False, error="x")], 5.0).ignored


def test_cancel_unstarted_needs_a_cancel_and_does_nothing_when_all_run() -> None:
    s = running_bc()
    assert not engine.cancel_unstarted(s, 2.0, set()).changed()
    engine.cancel(s, 2.0)
    assert not engine.cancel_unstarted(s, 3.0, {"wf/b/1", "wf/c/1"}).changed()
    assert statuses(s)["b"] == "running"


def test_released_attempts_are_matched_by_their_suffixed_key() -> None:
    s = running_bc()
    engine.apply(s, [Completion("b", 1, False, released=True)], 2.0)
    assert engine.attempt_key(s, "b") == "wf/b/1.1"
    engine.cancel(s, 3.0)
    fx = engine.cancel_unstarted(s, 4.0, {"wf/b/1"})  # the old delivery's key
    assert ("b", "running", "cancelled") in fx.transitions


def test_child_workflow_tasks_are_left_to_their_child() -> None:
    child = WorkflowDef("child", (TaskDef("x"),))
    s = engine.create(WorkflowDef("p", (TaskDef("sub", workflow=SubWorkflow(
        definition=child)),)), "wf", 0.0)
    engine.start(s, 0.0)
    engine.cancel(s, 1.0)
    assert engine.stopping_keys(s) == []
    assert not engine.cancel_unstarted(s, 2.0, set()).changed()


def test_judge_attempt() -> None:
    s = running_bc()
    assert engine.judge_attempt(s, "b", 1, "wf/b/1") == "run"
    assert engine.judge_attempt(s, "a", 1, "wf/a/1") == "ended"  # completed
    assert engine.judge_attempt(s, "d", 1, "wf/d/1") == "unknown"  # state predates it
    assert engine.judge_attempt(s, "b", 2, "wf/b/2") == "unknown"
    assert engine.judge_attempt(s, "nope", 1, "wf/nope/1") == "unknown"
    engine.apply(s, [Completion("b", 1, False, released=True)], 2.0)
    assert engine.judge_attempt(s, "b", 1, "wf/b/1") == "ended"  # given back, re-sent
    assert engine.judge_attempt(s, "b", 1, "wf/b/1.1") == "run"
    engine.cancel(s, 3.0)
    assert engine.judge_attempt(s, "b", 1, "wf/b/1.1") == "cancelled"
    engine.cancel_unstarted(s, 4.0, set())
    assert engine.judge_attempt(s, "b", 1, "wf/b/1.1") == "ended"


def test_retry_without_dispatch_leaves_resets_pending_until_resume() -> None:
    s = engine.create(DIAMOND, "wf", 0.0)
    engine.start(s, 0.0)
    engine.apply(s, [Completion("a", 1, False, error="boom")], 1.0)
    assert s.status == "failed"
    fx = engine.retry(s, 2.0, "r1", dispatch=False)
    assert s.status == "running" and not fx.dispatched and "wf/a/2" not in s.outbox
    assert set(statuses(s).values()) == {"pending"}
    fx = engine.resume(s, 3.0)
    assert [(d.task, d.attempt) for d in fx.dispatched] == [("a", 2)]
    assert statuses(s) == {"a": "running", "b": "pending", "c": "pending", "d": "pending"}
    assert not engine.resume(s, 4.0).changed()  # idempotent

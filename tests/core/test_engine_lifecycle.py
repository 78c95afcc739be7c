"""Task and workflow status transitions, start, result policies, duplicates and stale."""

from __future__ import annotations

from typing import Any

import pytest

from dagq.core import engine
from dagq.core.engine import Completion, WorkflowState
from dagq.core.model import TaskDef, WorkflowDef


def wf(*tasks: TaskDef, **kw: Any) -> WorkflowDef:
    return WorkflowDef("t", tasks, **kw)


def started(defn: WorkflowDef, now: float = 0.0) -> WorkflowState:
    s = engine.create(defn, "wf", now)
    engine.start(s, now)
    return s


def status(s: WorkflowState, name: str) -> str:
    return s.task_view(name).status


CHAIN = wf(TaskDef("a"), TaskDef("b", depends_on=("a",)))


def test_create_is_pending_and_dispatches_nothing() -> None:
    s = engine.create(CHAIN, "wf", 5.0)
    assert s.status == "pending"
    assert s.counts() == {"pending": 2}
    assert s.outbox == {}
    assert (s.created_at, s.updated_at) == (5.0, 5.0)
    assert not s.is_terminal()


def test_start_dispatches_roots_and_is_idempotent() -> None:
    s = engine.create(CHAIN, "wf", 0.0)
    fx = engine.start(s, 1.0)
    assert fx.workflow_status == ("pending", "running")
    assert fx.transitions == [("a", "pending", "ready"), ("a", "ready", "running")]
    assert [d for d in fx.dispatched] == [engine.Dispatch("wf/a/1", "a", 1, "default", 0.0, None)]
    assert set(s.outbox) == {"wf/a/1"}
    assert s.outbox["wf/a/1"].kind == "dispatch"
    assert s.outbox["wf/a/1"].written_at == 1.0
    assert s.running() == [("a", 1)]
    assert s.updated_at == 1.0
    again = engine.start(s, 2.0)
    assert not again.changed()
    assert s.updated_at == 1.0


def test_task_walks_pending_ready_running_completed() -> None:
    s = started(CHAIN)
    fx = engine.apply(s, [Completion("a", 1, True, output={"n": 1})], 2.0)
    assert fx.transitions == [("a", "running", "completed"), ("b", "pending", "ready"),
                              ("b", "ready", "running")]
    view = s.task_view("a")
    assert (view.status, view.attempt, view.output, view.finished_at) == (
        "completed", 1, {"n": 1}, 2.0)
    assert s.task_view("b").dispatched_at == 2.0
    fx = engine.apply(s, [Completion("b", 1, True)], 3.0)
    assert fx.workflow_status == ("running", "completed")
    assert s.is_terminal()
    assert s.counts() == {"completed": 2}


def test_failure_without_retries_fails_task_and_workflow() -> None:
    s = started(CHAIN)
    fx = engine.apply(s, [Completion("a", 1, False, error="exit 3")], 2.0)
    assert fx.transitions == [("a", "running", "failed"), ("b", "pending", "upstream_failed")]
    assert fx.workflow_status == ("running", "failed")
    assert s.task_view("a").error == "exit 3"


def test_workflow_without_tasks_completes_on_start() -> None:
    s = engine.create(wf(), "wf", 0.0)
    assert engine.start(s, 0.0).workflow_status == ("pending", "completed")


@pytest.mark.parametrize(("policy", "want"), [("all_sinks_succeed", "completed"),
                                              ("all_tasks_succeed", "failed")])
def test_result_policies(policy: Any, want: str) -> None:
    # a fails, b succeeds, sink s runs with "any": every sink completes, one task failed
    s = started(wf(TaskDef("a"), TaskDef("b"), TaskDef("s", depends_on=("a", "b"),
                                                        dep_policy="any"),
                   result_policy=policy))
    engine.apply(s, [Completion("a", 1, False), Completion("b", 1, True)], 1.0)
    engine.apply(s, [Completion("s", 1, True)], 2.0)
    assert s.status == want


def test_a_failed_sink_fails_the_workflow_even_if_another_sink_completed() -> None:
    s = started(wf(TaskDef("a"), TaskDef("b")))
    engine.apply(s, [Completion("a", 1, True), Completion("b", 1, False)], 1.0)
    assert s.status == "failed"


def test_skipped_sink_counts_as_success() -> None:
    s = started(wf(TaskDef("a"), TaskDef("b", depends_on=("a",), condition="inputs.a == 1")))
    fx = engine.apply(s, [Completion("a", 1, True, output=2)], 1.0)
    assert status(s, "b") == "skipped"
    assert fx.workflow_status == ("running", "completed")
    assert "b" in fx.notes


def test_workflow_stays_running_while_anything_is_not_terminal() -> None:
    s = started(wf(TaskDef("a"), TaskDef("b")))
    fx = engine.apply(s, [Completion("a", 1, False)], 1.0)
    assert fx.workflow_status is None
    assert s.status == "running"


class TestIgnored:
    def test_duplicate_completion_is_ignored_and_reported(self) -> None:
        s = started(CHAIN)
        first = Completion("a", 1, True, output=1)
        dup = Completion("a", 1, False, error="late")
        fx = engine.apply(s, [first, dup], 1.0)
        assert fx.ignored == [(dup, "duplicate: attempt 1 already ended (completed)")]
        assert s.task_view("a").output == 1
        again = engine.apply(s, [first], 2.0)
        assert again.ignored and not again.changed()
        assert s.updated_at == 1.0

    def test_stale_attempt_is_ignored(self) -> None:
        s = started(wf(TaskDef("a", num_retries=2)))
        engine.apply(s, [Completion("a", 1, False)], 1.0)
        assert s.task_view("a").attempt == 2
        stale = Completion("a", 1, True)
        fx = engine.apply(s, [stale], 2.0)
        assert fx.ignored == [(stale, "stale: attempt 1 was superseded by attempt 2")]
        assert status(s, "a") == "running"

    def test_future_attempt_unknown_task_and_undispatched_task_are_ignored(self) -> None:
        s = started(CHAIN)
        future, unknown, early = (Completion("a", 2, True), Completion("zz", 1, True),
                                  Completion("b", 1, True))
        fx = engine.apply(s, [future, unknown, early], 1.0)
        assert [r for _, r in fx.ignored] == [
            "attempt 2 was never dispatched (latest is 1)", "unknown task 'zz'",
            "attempt 1 was never dispatched (latest is 0)"]
        assert not fx.changed()
        assert s.counts() == {"pending": 1, "running": 1}

    def test_out_of_order_batch_applies_each_completion_once(self) -> None:
        s = started(wf(TaskDef("a"), TaskDef("b"), TaskDef("c", depends_on=("a", "b"))))
        batch = [Completion("b", 1, True), Completion("c", 1, True), Completion("a", 1, True),
                 Completion("b", 1, True)]
        fx = engine.apply(s, batch, 1.0)
        assert [c.task for c, _ in fx.ignored] == ["c", "b"]
        assert status(s, "c") == "running"
        assert s.task_view("c").attempt == 1


def test_apply_before_start_changes_nothing() -> None:
    s = engine.create(CHAIN, "wf", 0.0)
    fx = engine.apply(s, [Completion("a", 1, True)], 1.0)
    assert fx.ignored and s.status == "pending"


def test_inputs_are_outputs_or_refs_of_completed_dependencies() -> None:
    from dagq.core.model import OutputRef

    ref = OutputRef("outputs/wf/b/1.json", "abc", 10)
    s = started(wf(TaskDef("a"), TaskDef("b"), TaskDef("c"),
                   TaskDef("j", depends_on=("a", "b", "c"), dep_policy=1)))
    engine.apply(s, [Completion("a", 1, True, output=[1]), Completion("b", 1, True,
                                                                      output_ref=ref),
                     Completion("c", 1, False)], 1.0)
    assert s.inputs_of("j") == {"a": [1], "b": ref}


def test_every_status_transition_happens_and_no_other() -> None:
    """Drive scenarios that together cover the whole task state machine."""
    seen: set[tuple[str, str]] = set()

    def note(fx: engine.Effects) -> None:
        seen.update((old, new) for _, old, new in fx.transitions)

    # conditions, retries, failures and a workflow retry
    s = engine.create(wf(TaskDef("a", num_retries=1), TaskDef("b", depends_on=("a",)),
                         TaskDef("c", depends_on=("a",), condition="inputs.a == 2"),
                         TaskDef("m", depends_on=("a",), merge=True)), "wf", 0.0)
    note(engine.start(s, 0.0))
    note(engine.apply(s, [Completion("a", 1, False)], 1.0))
    note(engine.apply(s, [Completion("a", 2, False)], 2.0))
    note(engine.retry(s, 3.0, "r"))
    note(engine.apply(s, [Completion("a", 3, True, output=1)], 4.0))
    note(engine.apply(s, [Completion("b", 1, True)], 5.0))
    # a parallelism cap, then a cancel with a held task, a running task stopped and retried
    s = engine.create(wf(TaskDef("x"), TaskDef("y"), TaskDef("z", depends_on=("x",)),
                         max_parallelism=1), "wf", 0.0)
    note(engine.start(s, 0.0))
    note(engine.cancel(s, 1.0))
    note(engine.apply(s, [Completion("x", 1, False)], 2.0))
    note(engine.retry(s, 3.0, "r"))
    assert seen == {
        ("pending", "ready"), ("ready", "running"), ("running", "completed"),
        ("running", "failed"), ("pending", "upstream_failed"), ("pending", "skipped"),
        ("ready", "completed"),  # merge node
        ("failed", "pending"), ("upstream_failed", "pending"), ("pending", "cancelled"),
        ("ready", "cancelled"), ("running", "cancelled"), ("cancelled", "pending"),
    }

"""Cancelling a workflow and retrying a finished one."""

from __future__ import annotations

from typing import Any

from dagq.core import engine
from dagq.core.engine import Completion, WorkflowState
from dagq.core.model import TaskDef, WorkflowDef


def wf(*tasks: TaskDef, **kw: Any) -> WorkflowDef:
    return WorkflowDef("t", tasks, **kw)


def started(defn: WorkflowDef, now: float = 0.0) -> WorkflowState:
    s = engine.create(defn, "wf", now)
    engine.start(s, now)
    return s


def statuses(s: WorkflowState) -> dict[str, str]:
    return {v.name: v.status for v in s.iter_task_views()}


DIAMOND = wf(TaskDef("a"), TaskDef("b", depends_on=("a",)), TaskDef("c", depends_on=("a",)),
             TaskDef("d", depends_on=("b", "c")))


class TestCancel:
    def test_cancel_while_running_stops_running_and_cancels_the_rest(self) -> None:
        s = started(DIAMOND)
        engine.apply(s, [Completion("a", 1, True)], 1.0)
        fx = engine.cancel(s, 2.0)
        assert sorted(fx.stop) == [("b", 1), ("c", 1)]
        assert fx.transitions == [("d", "pending", "cancelled")]
        assert fx.workflow_status is None and s.status == "running"
        assert fx.changed()
        fx = engine.apply(s, [Completion("b", 1, False, error="SIGTERM")], 3.0)
        assert fx.transitions == [("b", "running", "cancelled")]
        assert s.task_view("b").error == "SIGTERM"
        fx = engine.apply(s, [Completion("c", 1, True, output=1)], 4.0)
        assert fx.transitions == [("c", "running", "completed")]
        assert fx.workflow_status == ("running", "cancelled")
        assert statuses(s) == {"a": "completed", "b": "cancelled", "c": "completed",
                               "d": "cancelled"}

    def test_cancel_is_idempotent_and_noop_on_finished_workflows(self) -> None:
        s = started(DIAMOND)
        engine.cancel(s, 1.0)
        assert not engine.cancel(s, 2.0).changed()
        done = started(wf(TaskDef("a")))
        engine.apply(done, [Completion("a", 1, True)], 1.0)
        assert not engine.cancel(done, 2.0).changed()
        assert done.status == "completed"

    def test_cancel_before_start(self) -> None:
        s = engine.create(DIAMOND, "wf", 0.0)
        fx = engine.cancel(s, 1.0)
        assert fx.workflow_status == ("pending", "cancelled")
        assert set(statuses(s).values()) == {"cancelled"}
        assert not engine.start(s, 2.0).changed()

    def test_failures_and_releases_of_stopped_tasks_do_not_retry(self) -> None:
        s = started(wf(TaskDef("a", num_retries=5), TaskDef("b", num_retries=5)))
        engine.cancel(s, 1.0)
        fx = engine.apply(s, [Completion("a", 1, False), Completion("b", 1, False,
                                                                      released=True)], 2.0)
        assert fx.dispatched == []
        assert fx.workflow_status == ("running", "cancelled")

    def test_delayed_attempt_that_has_not_started_is_cancelled_at_once(self) -> None:
        s = started(wf(TaskDef("a", delay_s=60), TaskDef("b")))
        fx = engine.cancel(s, 10.0)
        assert fx.stop == [("b", 1)]
        assert ("a", "running", "cancelled") in fx.transitions
        assert engine.apply(s, [Completion("a", 1, True)], 70.0).ignored

    def test_expired_stopped_task_ends_cancelled(self) -> None:
        s = started(wf(TaskDef("a", timeout_s=5)))
        engine.cancel(s, 1.0)
        fx = engine.expire(s, 6.0)
        assert fx.transitions == [("a", "running", "cancelled")]
        assert s.status == "cancelled"

    def test_held_tasks_are_cancelled(self) -> None:
        s = started(wf(TaskDef("a"), TaskDef("b"), TaskDef("c"), max_parallelism=1))
        assert s.counts() == {"running": 1, "ready": 2}
        engine.cancel(s, 1.0)
        fx = engine.apply(s, [Completion("a", 1, True)], 2.0)
        assert fx.dispatched == []
        assert statuses(s) == {"a": "completed", "b": "cancelled", "c": "cancelled"}


class TestRetry:
    def test_retry_resets_failed_and_upstream_failed_and_continues_attempts(self) -> None:
        s = started(wf(TaskDef("a", num_retries=1), TaskDef("b", depends_on=("a",)),
                       TaskDef("x")))
        engine.apply(s, [Completion("x", 1, True, output="keep")], 1.0)
        engine.apply(s, [Completion("a", 1, False)], 2.0)
        engine.apply(s, [Completion("a", 2, False)], 3.0)
        assert s.status == "failed"
        fx = engine.retry(s, 4.0, "r1")
        assert fx.workflow_status == ("failed", "running")
        assert fx.transitions[:2] == [("a", "failed", "pending"), ("b", "upstream_failed",
                                                                   "pending")]
        assert [(d.key, d.attempt) for d in fx.dispatched] == [("wf/a/3", 3)]
        assert statuses(s) == {"a": "running", "b": "pending", "x": "completed"}
        assert s.task_view("x").output == "keep"
        # stale completions from the first round are ignored
        stale = engine.apply(s, [Completion("a", 2, True), Completion("a", 1, True)], 5.0)
        assert len(stale.ignored) == 2 and not stale.changed()
        # the new round has the full budget again: attempt 3 fails, attempt 4 runs
        fx = engine.apply(s, [Completion("a", 3, False)], 6.0)
        assert [d.attempt for d in fx.dispatched] == [4]
        engine.apply(s, [Completion("a", 4, True)], 7.0)
        engine.apply(s, [Completion("b", 1, True)], 8.0)
        assert s.status == "completed"

    def test_retry_is_idempotent_per_request_id(self) -> None:
        s = started(wf(TaskDef("a")))
        engine.apply(s, [Completion("a", 1, False)], 1.0)
        assert engine.retry(s, 2.0, "r1").dispatched
        assert not engine.retry(s, 3.0, "r1").changed()
        engine.apply(s, [Completion("a", 2, False)], 4.0)
        assert [d.attempt for d in engine.retry(s, 5.0, "r2").dispatched] == [3]

    def test_completion_of_a_previous_round_while_the_task_waits_is_stale(self) -> None:
        # with one slot, the reset task b waits (ready) behind a; its old attempt is stale
        s2 = started(wf(TaskDef("a"), TaskDef("b"), max_parallelism=1))
        engine.apply(s2, [Completion("a", 1, False)], 1.0)
        engine.apply(s2, [Completion("b", 1, False)], 2.0)
        engine.retry(s2, 3.0, "r")
        assert s2.counts() == {"running": 1, "ready": 1}
        dup = Completion("b", 1, False)
        fx = engine.apply(s2, [dup], 4.0)
        assert fx.ignored == [(dup, "stale: attempt 1 ended before the workflow was retried")]

    def test_retry_reevaluates_conditions(self) -> None:
        # the first round: a fails, so c (conditional on a) is upstream_failed
        s = started(wf(TaskDef("a"), TaskDef("c", depends_on=("a",),
                                             condition="inputs.a.ok == true"),
                       TaskDef("d", depends_on=("a",), condition="inputs.a.ok == false")))
        engine.apply(s, [Completion("a", 1, False)], 1.0)
        assert s.status == "failed"
        engine.retry(s, 2.0, "r")
        fx = engine.apply(s, [Completion("a", 2, True, output={"ok": True})], 3.0)
        assert statuses(s) == {"a": "completed", "c": "running", "d": "skipped"}
        assert fx.notes == {"d": "condition is false: inputs.a.ok == false"}

    def test_retry_with_a_reset_task_whose_policy_is_already_met(self) -> None:
        # j (any) was upstream_failed because both deps failed; after retry d0 is
        # rerun while j waits, and j runs as soon as d0 succeeds
        s = started(wf(TaskDef("d0"), TaskDef("d1"), TaskDef("j", depends_on=("d0", "d1"),
                                                              dep_policy="any")))
        engine.apply(s, [Completion("d0", 1, False), Completion("d1", 1, False)], 1.0)
        assert s.task_view("j").status == "upstream_failed"
        fx = engine.retry(s, 2.0, "r")
        assert sorted(d.task for d in fx.dispatched) == ["d0", "d1"]
        assert s.task_view("j").status == "pending"
        engine.apply(s, [Completion("d0", 2, True)], 3.0)
        assert s.task_view("j").status == "running"

    def test_retry_after_cancel_runs_cancelled_tasks_and_stopped_ones(self) -> None:
        s = started(DIAMOND)
        engine.apply(s, [Completion("a", 1, True)], 1.0)
        engine.cancel(s, 2.0)
        engine.apply(s, [Completion("b", 1, False)], 3.0)
        assert s.status == "running"  # c is still being stopped
        fx = engine.retry(s, 4.0, "r")
        assert fx.transitions == [("b", "cancelled", "pending"), ("d", "cancelled", "pending"),
                                  ("b", "pending", "ready"), ("b", "ready", "running")]
        # c's stop was withdrawn: its failure starts a new round instead of cancelling it
        fx = engine.apply(s, [Completion("c", 1, False, error="SIGTERM")], 5.0)
        assert [(d.task, d.attempt) for d in fx.dispatched] == [("c", 2)]
        engine.apply(s, [Completion("b", 2, True), Completion("c", 2, True)], 6.0)
        engine.apply(s, [Completion("d", 1, True)], 7.0)
        assert s.status == "completed"

    def test_retry_of_a_workflow_cancelled_before_start_starts_it(self) -> None:
        s = engine.create(DIAMOND, "wf", 0.0)
        engine.cancel(s, 1.0)
        fx = engine.retry(s, 2.0, "r")
        assert fx.workflow_status == ("cancelled", "running")
        assert [d.key for d in fx.dispatched] == ["wf/a/1"]

    def test_retry_of_a_completed_or_pending_workflow_changes_nothing(self) -> None:
        s = started(wf(TaskDef("a")))
        engine.apply(s, [Completion("a", 1, True)], 1.0)
        assert not engine.retry(s, 2.0, "r").changed()
        p = engine.create(DIAMOND, "wf", 0.0)
        assert not engine.retry(p, 1.0, "r").changed()
        assert p.status == "pending"

    def test_retry_never_leaves_a_task_stranded_in_pending(self) -> None:
        # c depends on a (completed) and b (failed); after retry b reruns; once the
        # workflow settles every task is terminal
        s = started(wf(TaskDef("a"), TaskDef("b"), TaskDef("c", depends_on=("a", "b")),
                       TaskDef("e", depends_on=("c",), dep_policy="any")))
        engine.apply(s, [Completion("a", 1, True), Completion("b", 1, False)], 1.0)
        engine.retry(s, 2.0, "r")
        engine.apply(s, [Completion("b", 2, True)], 3.0)
        engine.apply(s, [Completion("c", 1, True)], 4.0)
        engine.apply(s, [Completion("e", 1, True)], 5.0)
        assert s.status == "completed"
        assert "pending" not in statuses(s).values()

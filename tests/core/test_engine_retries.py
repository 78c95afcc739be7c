"""Attempt retries with backoff, released attempts and timeouts (expire)."""

from __future__ import annotations

from typing import Any

import pytest

from dagq.core import engine
from dagq.core.engine import Completion, WorkflowState
from dagq.core.model import TaskDef, WorkflowDef
from dagq.core.policy import retry_delay


def wf(*tasks: TaskDef, **kw: Any) -> WorkflowDef:
    return WorkflowDef("t", tasks, **kw)


def started(defn: WorkflowDef, now: float = 0.0) -> WorkflowState:
    s = engine.create(defn, "wf", now)
    engine.start(s, now)
    return s


def fail(s: WorkflowState, name: str, attempt: int, now: float = 1.0) -> engine.Effects:
    fx = engine.apply(s, [Completion(name, attempt, False, error=f"boom {attempt}")], now)
    assert not fx.ignored
    return fx


def test_retries_within_budget_redispatch_with_next_attempt_and_backoff() -> None:
    s = started(wf(TaskDef("a", num_retries=3, retry_backoff_s=10, retry_backoff_max_s=25),
                   TaskDef("b", depends_on=("a",))))
    delays = []
    for attempt in (1, 2, 3):
        fx = fail(s, "a", attempt, now=float(attempt))
        assert fx.transitions == []  # stays running between attempts
        (d,) = fx.dispatched
        assert (d.key, d.attempt) == (f"wf/a/{attempt + 1}", attempt + 1)
        delays.append(d.delay_s)
        view = s.task_view("a")
        assert (view.status, view.attempt, view.error) == ("running", attempt + 1,
                                                           f"boom {attempt}")
    assert delays == [10.0, 20.0, 25.0]  # 10 * 2**(k-1), capped at 25
    fx = engine.apply(s, [Completion("a", 4, True)], 5.0)
    assert s.task_view("a").error is None
    assert [d.task for d in fx.dispatched] == ["b"]


def test_exhausted_retries_fail_the_task_and_cascade() -> None:
    s = started(wf(TaskDef("a", num_retries=1), TaskDef("b", depends_on=("a",))))
    fail(s, "a", 1)
    fx = fail(s, "a", 2)
    assert fx.dispatched == []
    assert fx.transitions == [("a", "running", "failed"), ("b", "pending", "upstream_failed")]
    assert s.task_view("a").error == "boom 2"
    assert s.task_view("a").attempt == 2


def test_no_backoff_means_immediate_retry() -> None:
    s = started(wf(TaskDef("a", num_retries=1)))
    assert fail(s, "a", 1).dispatched[0].delay_s == 0.0


@pytest.mark.parametrize(("k", "want"), [(0, 0.0), (1, 1.5), (2, 3.0), (3, 6.0), (10, 100.0),
                                         (500, 100.0)])
def test_retry_delay_formula(k: int, want: float) -> None:
    assert retry_delay(k, 1.5, 100.0) == want


def test_released_attempt_is_dispatched_again_without_using_the_budget() -> None:
    s = started(wf(TaskDef("a", num_retries=0)))
    fx = engine.apply(s, [Completion("a", 1, False, released=True)], 1.0)
    (d,) = fx.dispatched
    assert (d.attempt, d.key, d.delay_s) == (1, "wf/a/1.1", 0.0)
    fx = engine.apply(s, [Completion("a", 1, False, released=True)], 2.0)
    assert fx.dispatched[0].key == "wf/a/1.2"
    assert set(s.outbox) == {"wf/a/1", "wf/a/1.1", "wf/a/1.2"}
    engine.apply(s, [Completion("a", 1, True, output=7)], 3.0)
    assert (s.status, s.task_view("a").output) == ("completed", 7)


def test_released_then_failed_uses_the_budget_normally() -> None:
    s = started(wf(TaskDef("a", num_retries=1)))
    engine.apply(s, [Completion("a", 1, False, released=True)], 1.0)
    fx = fail(s, "a", 1)
    assert fx.dispatched[0].key == "wf/a/2"
    fail(s, "a", 2)
    assert s.status == "failed"


class TestTimeouts:
    def test_deadline_includes_delay_and_grace(self) -> None:
        s = started(wf(TaskDef("a", timeout_s=30, delay_s=5)), now=100.0)
        d = s.outbox["wf/a/1"].payload
        assert isinstance(d, engine.Dispatch)
        assert (d.delay_s, d.timeout_s) == (5.0, 30.0)
        assert not engine.expire(s, 135.0).changed()  # deadline is 100 + 5 + 30
        assert not engine.expire(s, 140.0, grace_s=10).changed()
        fx = engine.expire(s, 145.5, grace_s=10)
        assert fx.stop == [("a", 1)]
        assert fx.transitions == [("a", "running", "failed")]
        assert s.task_view("a").error == "timed out after 30s"

    def test_timeout_counts_as_a_failure_so_retries_apply(self) -> None:
        s = started(wf(TaskDef("a", timeout_s=10, num_retries=1, retry_backoff_s=2)))
        fx = engine.expire(s, 11.0)
        (d,) = fx.dispatched
        assert (d.attempt, d.delay_s) == (2, 2.0)
        # the retry's deadline counts from its own dispatch: 11 + 2 + 10
        assert not engine.expire(s, 22.5).changed()
        late = Completion("a", 1, True)
        assert engine.apply(s, [late], 23.0).ignored[0][0] == late
        assert engine.expire(s, 23.5).transitions == [("a", "running", "failed")]

    def test_default_task_timeout_applies_and_finished_tasks_never_expire(self) -> None:
        s = started(wf(TaskDef("a"), TaskDef("b"), default_task_timeout_s=60))
        engine.apply(s, [Completion("a", 1, True)], 10.0)
        fx = engine.expire(s, 61.0)
        assert fx.stop == [("b", 1)]
        assert s.task_view("a").status == "completed"

    def test_released_attempt_gets_a_fresh_deadline(self) -> None:
        s = started(wf(TaskDef("a", timeout_s=10)))
        engine.apply(s, [Completion("a", 1, False, released=True)], 8.0)
        assert not engine.expire(s, 12.0).changed()  # the old deadline (10) no longer counts
        assert engine.expire(s, 18.5).stop == [("a", 1)]

    def test_no_timeout_never_expires(self) -> None:
        s = started(wf(TaskDef("a")))
        assert not engine.expire(s, 1e12).changed()

"""Explanations and phases: pure functions of a state, the time and the worker facts."""

from __future__ import annotations

from typing import Any

from dagq.core import engine
from dagq.core.engine import Completion, WorkflowState
from dagq.core.explain import Facts, explain, phase_of, phases
from dagq.core.model import TaskDef, WorkflowDef


def started(*tasks: TaskDef, now: float = 100.0, **kw: Any) -> WorkflowState:
    s = engine.create(WorkflowDef("t", tasks, **kw), "wf", now)
    engine.start(s, now)
    return s


def why(s: WorkflowState, task: str, facts: Facts) -> str:
    (e,) = explain(s, facts, task)
    return " | ".join(e.reasons)


def test_a_dispatched_task_is_queued_until_a_worker_reports_it_then_started() -> None:
    s = started(TaskDef("a"))
    i = s.graph.index["a"]
    assert phase_of(s, i, Facts(101.0)) == "queued"
    assert phase_of(s, i, Facts(101.0, started=frozenset({"wf/a/1"}))) == "started"
    assert phase_of(s, i, Facts(101.0, started=frozenset({"wf/a/2"}))) == "queued"


def test_queued_on_a_queue_without_live_worker_says_so_and_how_to_fix_it() -> None:
    s = started(TaskDef("a", queue="gpu"))
    text = why(s, "a", Facts(110.0, live_queues=frozenset({"default"})))
    assert "queue 'gpu' has no live worker" in text and "dagq worker gpu" in text
    assert "no live worker" not in why(s, "a", Facts(110.0, live_queues=frozenset({"gpu"})))
    assert "no live worker" not in why(s, "a", Facts(110.0))  # unknown: say nothing


def test_unmet_dependencies_are_named_and_the_policy_is_explained() -> None:
    s = started(TaskDef("a"), TaskDef("b"), TaskDef("c", depends_on=("a", "b"), dep_policy=2))
    engine.apply(s, [Completion("a", 1, True)], 101.0)
    (e,) = explain(s, Facts(102.0), "c")
    assert e.phase == "pending" and e.waiting_for == ("b",)
    assert "waiting for dependencies: b" in e.reasons[0]
    assert "needs 2 of 2" in e.reasons[1] and "1 did" in e.reasons[1]


def test_a_false_condition_shows_the_expression_and_the_values_it_saw() -> None:
    s = started(TaskDef("a"), TaskDef("b", depends_on=("a",), condition="inputs.a.v > 5"))
    engine.apply(s, [Completion("a", 1, True, output={"v": 1})], 101.0)
    text = why(s, "b", Facts(102.0))
    assert "condition is false: inputs.a.v > 5" in text and 'a={"v": 1}' in text


def test_retry_back_off_is_waiting_with_its_deadline_then_queued() -> None:
    s = started(TaskDef("a", num_retries=2, retry_backoff_s=30))
    engine.apply(s, [Completion("a", 1, False, error="boom")], 200.0)
    (e,) = explain(s, Facts(210.0), "a")
    assert e.phase == "waiting" and e.until == 230.0
    assert "retry back-off after attempt 1 failed (boom)" in e.reasons[0]
    assert "1970-01-01T00:03:50Z (in 20s)" in e.reasons[0]
    assert phases(s, Facts(231.0))["a"] == "queued"


def test_delay_parallelism_cap_cancel_and_stale_outbox() -> None:
    s = started(TaskDef("a", delay_s=60), TaskDef("b"), TaskDef("c"), max_parallelism=2)
    assert phases(s, Facts(101.0)) == {"a": "waiting", "b": "queued", "c": "held"}
    assert "delay_s=60" in why(s, "a", Facts(101.0))
    assert "max_parallelism=2" in why(s, "c", Facts(101.0))
    assert "stale outbox" in why(s, "b", Facts(200.0, outbox_grace_s=30))
    engine.cancel(s, 201.0)
    assert "cancel pending" in why(s, "b", Facts(202.0))


def test_terminal_tasks_say_what_ended_them() -> None:
    s = started(TaskDef("a"), TaskDef("b", depends_on=("a",)))
    engine.apply(s, [Completion("a", 1, False, error="exit 3\ntrace")], 101.0)
    assert "attempt 1 failed" in why(s, "a", Facts(102.0)) and "exit 3" in why(s, "a",
                                                                               Facts(102.0))
    assert "dependencies did not succeed: a" in why(s, "b", Facts(102.0))

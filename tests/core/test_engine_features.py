"""max_parallelism, delays, merge nodes, conditions, sub-workflows and parent notices."""

from __future__ import annotations

from typing import Any

import pytest

from dagq.core import engine
from dagq.core.engine import Completion, WorkflowState
from dagq.core.model import OutputRef, SubWorkflow, TaskDef, WorkflowDef


def wf(*tasks: TaskDef, **kw: Any) -> WorkflowDef:
    return WorkflowDef("t", tasks, **kw)


def started(defn: WorkflowDef, now: float = 0.0, wid: str = "wf") -> WorkflowState:
    s = engine.create(defn, wid, now)
    engine.start(s, now)
    return s


def statuses(s: WorkflowState) -> dict[str, str]:
    return {v.name: v.status for v in s.iter_task_views()}


class TestMaxParallelism:
    def test_ready_tasks_wait_for_a_slot_in_order(self) -> None:
        s = started(wf(*(TaskDef(f"t{k}") for k in range(5)), max_parallelism=2))
        assert s.running() == [("t0", 1), ("t1", 1)]
        assert s.counts() == {"running": 2, "ready": 3}
        fx = engine.apply(s, [Completion("t1", 1, True)], 1.0)
        assert [d.task for d in fx.dispatched] == ["t2"]
        fx = engine.apply(s, [Completion("t0", 1, True), Completion("t2", 1, True)], 2.0)
        assert [d.task for d in fx.dispatched] == ["t3", "t4"]
        assert s.counts() == {"running": 2, "completed": 3}

    def test_slots_freed_and_taken_in_the_same_apply(self) -> None:
        # a -> b with cap 1 and an independent c: when a completes, c (held) takes the
        # slot first, then b waits until c finishes
        s = started(wf(TaskDef("a"), TaskDef("c"), TaskDef("b", depends_on=("a",)),
                       max_parallelism=1))
        fx = engine.apply(s, [Completion("a", 1, True)], 1.0)
        assert [d.task for d in fx.dispatched] == ["c"]
        assert statuses(s)["b"] == "ready"
        fx = engine.apply(s, [Completion("c", 1, True)], 2.0)
        assert [d.task for d in fx.dispatched] == ["b"]

    def test_retrying_task_keeps_its_slot(self) -> None:
        s = started(wf(TaskDef("a", num_retries=1), TaskDef("b"), max_parallelism=1))
        fx = engine.apply(s, [Completion("a", 1, False)], 1.0)
        assert [(d.task, d.attempt) for d in fx.dispatched] == [("a", 2)]
        assert statuses(s)["b"] == "ready"

    def test_delayed_tasks_hold_slots(self) -> None:
        s = started(wf(TaskDef("a", delay_s=100), TaskDef("b"), max_parallelism=1))
        assert s.running() == [("a", 1)]
        assert statuses(s)["b"] == "ready"

    def test_merge_nodes_do_not_take_slots(self) -> None:
        s = started(wf(TaskDef("a"), TaskDef("b"),
                       TaskDef("__merge_x_0", depends_on=("a",), merge=True),
                       max_parallelism=1))
        engine.apply(s, [Completion("a", 1, True)], 1.0)
        assert statuses(s)["__merge_x_0"] == "completed"


def test_delay_is_passed_on_dispatch_and_recorded() -> None:
    s = started(wf(TaskDef("a"), TaskDef("b", depends_on=("a",), delay_s=30)), now=10.0)
    fx = engine.apply(s, [Completion("a", 1, True)], 20.0)
    (d,) = fx.dispatched
    assert (d.task, d.delay_s) == ("b", 30.0)
    assert s.outbox[d.key].written_at == 20.0
    assert s.task_view("b").status == "running"


class TestMergeNodes:
    def test_merge_nodes_complete_inside_the_engine(self) -> None:
        s = started(wf(TaskDef("a"), TaskDef("b"),
                       TaskDef("__merge_j_0", depends_on=("a", "b"), merge=True),
                       TaskDef("j", depends_on=("__merge_j_0",))))
        fx = engine.apply(s, [Completion("a", 1, True), Completion("b", 1, True)], 1.0)
        assert ("__merge_j_0", "ready", "completed") in fx.transitions
        assert [d.task for d in fx.dispatched] == ["j"]
        view = s.task_view("__merge_j_0")
        assert (view.attempt, view.output, view.finished_at) == (1, None, 1.0)
        assert s.inputs_of("j") == {"__merge_j_0": None}

    def test_chained_merge_nodes_and_failure(self) -> None:
        s = started(wf(TaskDef("a"), TaskDef("__merge_z_0", depends_on=("a",), merge=True),
                       TaskDef("b", depends_on=("__merge_z_0",)),
                       TaskDef("__merge_z_1", depends_on=("__merge_z_0", "b"), merge=True),
                       TaskDef("z", depends_on=("__merge_z_1",))))
        engine.apply(s, [Completion("a", 1, True)], 1.0)
        engine.apply(s, [Completion("b", 1, False)], 2.0)
        assert statuses(s) == {"a": "completed", "__merge_z_0": "completed", "b": "failed",
                               "__merge_z_1": "upstream_failed", "z": "upstream_failed"}
        assert engine.apply(s, [Completion("__merge_z_0", 1, True)], 3.0).ignored

    def test_a_merge_root_completes_at_start(self) -> None:
        s = started(wf(TaskDef("m", merge=True)))
        assert s.status == "completed"


class TestConditions:
    def test_true_condition_runs_false_skips_with_a_note(self) -> None:
        s = started(wf(TaskDef("train"),
                       TaskDef("deploy", depends_on=("train",), condition="inputs.train.mae < 0.1"),
                       TaskDef("alert", depends_on=("train",),
                               condition="inputs.train.mae >= 0.1"),
                       TaskDef("after", depends_on=("alert",))))
        fx = engine.apply(s, [Completion("train", 1, True, output={"mae": 0.05})], 1.0)
        assert statuses(s) == {"train": "completed", "deploy": "running", "alert": "skipped",
                               "after": "running"}
        assert fx.notes == {"alert": "condition is false: inputs.train.mae >= 0.1"}
        assert s.task_view("alert").note == fx.notes["alert"]
        assert s.task_view("deploy").note is None

    def test_condition_errors_make_it_false_and_say_why(self) -> None:
        s = started(wf(TaskDef("a"), TaskDef("b", depends_on=("a",),
                                             condition="inputs.a.x < 0.1")))
        fx = engine.apply(s, [Completion("a", 1, True, output=None)], 1.0)
        assert statuses(s)["b"] == "skipped"
        assert fx.notes["b"] and "condition is false" not in fx.notes["b"]

    def test_output_refs_are_resolved_for_conditions(self) -> None:
        ref = OutputRef("outputs/wf/a/1.json", "00", 3)
        seen: list[OutputRef] = []

        def resolve(r: OutputRef) -> Any:
            seen.append(r)
            return {"ok": True}

        s = started(wf(TaskDef("a"), TaskDef("b", depends_on=("a",),
                                             condition="inputs.a.ok == true")))
        engine.apply(s, [Completion("a", 1, True, output_ref=ref)], 1.0, resolve=resolve)
        assert seen == [ref]
        assert statuses(s)["b"] == "running"

    def test_condition_with_any_policy_sees_only_finished_inputs(self) -> None:
        s = started(wf(TaskDef("a"), TaskDef("b"),
                       TaskDef("c", depends_on=("a", "b"), dep_policy="any",
                               condition="count(inputs.*.ok) >= 1")))
        engine.apply(s, [Completion("b", 1, True, output={"ok": True})], 1.0)
        assert statuses(s)["c"] == "running"
        assert s.inputs_of("c") == {"b": {"ok": True}}


class TestSubWorkflows:
    CHILD = wf(TaskDef("x"))

    def test_child_task_yields_child_submit_and_waits_for_its_completion(self) -> None:
        parent = started(wf(TaskDef("etl", workflow=SubWorkflow(definition=self.CHILD)),
                            TaskDef("after", depends_on=("etl",))),
                         wid="daily")
        child_id = engine.child_workflow_id("daily", "etl", 1)
        (sub,) = parent.outbox.values()
        assert sub.kind == "child"
        assert sub.payload == engine.ChildSubmit("daily/etl/1", "etl", 1, child_id, 0.0)
        assert parent.task_view("etl").status == "running"
        link = engine.ParentLink("daily", "etl", 1)
        child = engine.create(self.CHILD, child_id, 1.0, parent=link)
        engine.start(child, 1.0)
        fx = engine.apply(child, [Completion("x", 1, True)], 2.0)
        (notice,) = fx.notices
        assert notice == engine.ParentNotice("daily", "etl", 1, True, None,
                                             f"{child_id}/notice-1")
        assert child.outbox[notice.key].kind == "notice"
        fx = engine.apply(parent, [Completion(notice.task, notice.attempt, notice.success,
                                              error=notice.error)], 3.0)
        assert [d.task for d in fx.dispatched] == ["after"]

    def test_failed_child_notifies_again_after_a_retry(self) -> None:
        link = engine.ParentLink("p", "t", 2)
        child = engine.create(wf(TaskDef("x"), TaskDef("y", depends_on=("x",))), "p~t~2", 0.0,
                              parent=link)
        engine.start(child, 0.0)
        fx = engine.apply(child, [Completion("x", 1, False, error="no")], 1.0)
        (n1,) = fx.notices
        assert (n1.success, n1.key) == (False, "p~t~2/notice-1")
        assert n1.error == "child workflow p~t~2 failed: x, y"
        engine.retry(child, 2.0, "r")
        fx = engine.apply(child, [Completion("x", 2, True)], 3.0)
        assert fx.notices == []
        fx = engine.apply(child, [Completion("y", 1, True)], 4.0)
        (n2,) = fx.notices
        assert (n2.success, n2.key, n2.attempt) == (True, "p~t~2/notice-2", 2)

    def test_cancelled_child_notifies_and_cancel_lists_running_child_tasks(self) -> None:
        parent = started(wf(TaskDef("etl", workflow=SubWorkflow(definition=self.CHILD),
                                    delay_s=5)), wid="p")
        assert engine.cancel(parent, 1.0).stop == [("etl", 1)]  # not cancelled at once
        child = engine.create(self.CHILD, "c", 0.0, parent=engine.ParentLink("p", "etl", 1))
        fx = engine.cancel(child, 1.0)
        assert fx.notices[0].error == "child workflow c was cancelled"


@pytest.mark.parametrize(("parent", "task", "attempt", "want"), [
    ("daily", "eu_etl", 1, "daily~eu_etl~1"),
    ("a.b", "c-d", 12, "a.b~c-d~12"),
])
def test_child_ids_are_readable_when_names_are_safe(parent: str, task: str, attempt: int,
                                                    want: str) -> None:
    assert engine.child_workflow_id(parent, task, attempt) == want


def test_child_ids_are_safe_short_and_distinct() -> None:
    import re

    cases = [("p", "prep/featurize", 1), ("p", "prep?featurize", 1), ("p", "prep_featurize", 1),
             ("p", "a~b", 1), ("p~a", "b", 1), ("p", "é#\\\x01", 3), ("x" * 300, "t", 1),
             ("x" * 300, "u", 1), ("_p", "t", 1), ("p", "t" * 500, 99)]
    ids = [engine.child_workflow_id(*c) for c in cases]
    assert len(set(ids)) == len(ids)
    for cid in ids:
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._~-]{0,199}", cid), cid
    assert ids[0].startswith("p~prep_featurize~1~h")
    assert ids == [engine.child_workflow_id(*c) for c in cases]  # deterministic

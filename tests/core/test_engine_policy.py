"""Dependency policies: every row of the policy table, skipped as success, cascades."""

from __future__ import annotations

from typing import Any

import pytest

from dagq.core import engine
from dagq.core.engine import Completion, WorkflowState
from dagq.core.model import DepPolicy, TaskDef, WorkflowDef


def wf(*tasks: TaskDef, **kw: Any) -> WorkflowDef:
    return WorkflowDef("t", tasks, **kw)


def started(defn: WorkflowDef) -> WorkflowState:
    s = engine.create(defn, "wf", 0.0)
    engine.start(s, 0.0)
    return s


def finish(s: WorkflowState, name: str, success: bool = True, attempt: int = 1) -> engine.Effects:
    fx = engine.apply(s, [Completion(name, attempt, success, error=None if success else "x")],
                      1.0)
    assert not fx.ignored, fx.ignored
    return fx


def status(s: WorkflowState, name: str) -> str:
    return s.task_view(name).status


def join(policy: DepPolicy, n: int = 3) -> WorkflowDef:
    """n independent roots d0..d{n-1} and a join task j with ``policy``."""
    roots = [TaskDef(f"d{k}") for k in range(n)]
    return wf(*roots, TaskDef("j", depends_on=tuple(r.name for r in roots), dep_policy=policy))


# (policy, outcomes of d0.. in completion order, expected status of j after each outcome)
ROWS = [
    # all: runs when every dependency succeeded; fails at the first failure
    ("all", [True, True, True], ["pending", "pending", "running"]),
    ("all", [True, False], ["pending", "upstream_failed"]),
    ("all", [False], ["upstream_failed"]),
    # any: runs at the first success; fails only when every dependency failed
    ("any", [False, False, True], ["pending", "pending", "running"]),
    ("any", [True], ["running"]),
    ("any", [False, False, False], ["pending", "pending", "upstream_failed"]),
    # N=2 of 3: runs at the second success; fails when more than 3-2=1 failed
    (2, [True, False, True], ["pending", "pending", "running"]),
    (2, [False, True, True], ["pending", "pending", "running"]),
    (2, [True, True], ["pending", "running"]),
    (2, [False, False], ["pending", "upstream_failed"]),
    (2, [True, False, False], ["pending", "pending", "upstream_failed"]),
    # N=n behaves like all, N=1 like any
    (3, [True, True, False], ["pending", "pending", "upstream_failed"]),
    (1, [False, False, True], ["pending", "pending", "running"]),
]


@pytest.mark.parametrize(("policy", "outcomes", "expected"), ROWS)
def test_policy_table(policy: DepPolicy, outcomes: list[bool], expected: list[str]) -> None:
    s = started(join(policy))
    assert status(s, "j") == "pending"
    for k, (success, want) in enumerate(zip(outcomes, expected, strict=True)):
        finish(s, f"d{k}", success)
        assert status(s, "j") == want, (k, s.counts())


def test_policy_met_dispatches_before_other_dependencies_finish() -> None:
    s = started(join("any"))
    fx = finish(s, "d1")
    assert [d.task for d in fx.dispatched] == ["j"]
    assert s.inputs_of("j") == {"d1": None}  # d0 and d2 still running: not inputs
    assert status(s, "d0") == "running"


def test_late_dependency_failures_do_not_touch_a_task_already_started() -> None:
    s = started(join("any"))
    finish(s, "d0")
    fx = finish(s, "d1", success=False)
    assert status(s, "j") == "running"
    assert ("j", "running", "upstream_failed") not in fx.transitions


@pytest.mark.parametrize("policy", ["all", "any", 2])
def test_skipped_dependency_counts_as_success(policy: DepPolicy) -> None:
    # each d_k is guarded by a condition on its own root; all conditions are false
    tasks: list[TaskDef] = []
    for k in range(3):
        tasks.append(TaskDef(f"r{k}"))
        tasks.append(TaskDef(f"d{k}", depends_on=(f"r{k}",), condition=f"inputs.r{k}.go == 1"))
    tasks.append(TaskDef("j", depends_on=("d0", "d1", "d2"), dep_policy=policy))
    s = started(wf(*tasks))
    for k in range(3):
        finish(s, f"r{k}")
        assert status(s, f"d{k}") == "skipped"
    assert status(s, "j") == "running"
    assert s.inputs_of("j") == {"d0": None, "d1": None, "d2": None}


@pytest.mark.parametrize(("policy", "want"), [("all", "upstream_failed"), ("any", "running"),
                                              (2, "running"), (3, "upstream_failed")])
def test_upstream_failed_dependency_counts_as_failure(policy: DepPolicy, want: str) -> None:
    # d0 is upstream_failed (its root failed); d1 and d2 succeed
    s = started(wf(TaskDef("r"), TaskDef("d0", depends_on=("r",)), TaskDef("d1"), TaskDef("d2"),
                   TaskDef("j", depends_on=("d0", "d1", "d2"), dep_policy=policy)))
    finish(s, "r", success=False)
    assert status(s, "d0") == "upstream_failed"
    finish(s, "d1")
    finish(s, "d2")
    assert status(s, "j") == want


def test_cascade_reaches_every_descendant_that_can_no_longer_run() -> None:
    # a -> b -> c -> d ; c also depends on x with "any"; e depends on b and x with "all"
    s = started(wf(
        TaskDef("a"), TaskDef("x"),
        TaskDef("b", depends_on=("a",)),
        TaskDef("c", depends_on=("b", "x"), dep_policy="any"),
        TaskDef("d", depends_on=("c",)),
        TaskDef("e", depends_on=("b", "x")),
    ))
    fx = finish(s, "a", success=False)
    assert [t for t, _, new in fx.transitions if new == "upstream_failed"] == ["b", "e"]
    assert status(s, "c") == "pending"  # x may still succeed
    finish(s, "x")
    assert status(s, "c") == "running"
    assert s.inputs_of("c") == {"x": None}


def test_long_chain_cascade_is_not_recursive() -> None:
    n = 5000
    tasks = [TaskDef("t0")] + [TaskDef(f"t{k}", depends_on=(f"t{k - 1}",)) for k in range(1, n)]
    s = started(wf(*tasks))
    finish(s, "t0", success=False)
    assert s.counts() == {"failed": 1, "upstream_failed": n - 1}
    assert s.status == "failed"


def test_diamond_runs_the_join_once() -> None:
    s = started(wf(TaskDef("a"), TaskDef("b", depends_on=("a",)), TaskDef("c", depends_on=("a",)),
                   TaskDef("d", depends_on=("b", "c"))))
    finish(s, "a")
    fx1 = finish(s, "b")
    fx2 = finish(s, "c")
    assert fx1.dispatched == []
    assert [d.key for d in fx2.dispatched] == ["wf/d/1"]
    finish(s, "d")
    assert s.status == "completed"


@pytest.mark.parametrize(("policy", "n"), [(0, 2), (3, 2), ("most", 2), (1, 0)])
def test_impossible_policies_are_rejected_at_create(policy: Any, n: int) -> None:
    from dagq.errors import DefinitionError

    roots = [TaskDef(f"d{k}") for k in range(n)]
    defn = wf(*roots, TaskDef("j", depends_on=tuple(r.name for r in roots), dep_policy=policy))
    with pytest.raises(DefinitionError, match="dep_policy"):
        engine.create(defn, "wf", 0.0)

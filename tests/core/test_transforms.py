"""The fan-in transform, real upstream tasks and the graph helpers."""

from __future__ import annotations

import pytest

from dagq.core.model import SubWorkflow, TaskDef, WorkflowDef
from dagq.core.transforms import (
    cycle_through,
    real_upstream_tasks,
    sequentialize_fan_in,
    strongly_connected,
)
from dagq.core.validate import validate
from dagq.errors import DefinitionError
from tests.fixtures.definitions import join


def fan_in(n: int, **leaf: object) -> WorkflowDef:
    roots = tuple(join(f"r{i}") for i in range(n))
    return WorkflowDef("fan", (*roots, TaskDef("leaf", depends_on=tuple(r.name for r in roots),
                                               **leaf)))  # type: ignore[arg-type]


def edges(defn: WorkflowDef) -> dict[str, tuple[str, ...]]:
    return {t.name: t.depends_on for t in defn.tasks if t.depends_on}


def test_small_fan_ins_are_left_alone() -> None:
    defn = fan_in(3)
    assert sequentialize_fan_in(defn, 3) is defn


def test_batches_and_merge_chain_exactly() -> None:
    out = sequentialize_fan_in(fan_in(7, kwargs={"cmd": "agg"}, queue="big"), 3)
    assert [t.name for t in out.tasks] == [
        "r0", "r1", "r2", "r3", "r4", "r5", "r6",
        "__merge_leaf_0", "__merge_leaf_1", "__merge_leaf_2", "leaf"]
    assert edges(out) == {
        "__merge_leaf_0": ("r0", "r1", "r2"),
        "__merge_leaf_1": ("r3", "r4", "r5", "__merge_leaf_0"),
        "__merge_leaf_2": ("r6", "__merge_leaf_1"),
        "leaf": ("__merge_leaf_2",),
    }
    merges = [t for t in out.tasks if t.name.startswith("__merge_")]
    assert all(t.merge and t.dep_policy == "all" and not t.kwargs for t in merges)
    leaf = out.task("leaf")
    assert (leaf.kwargs, leaf.queue, leaf.merge) == ({"cmd": "agg"}, "big", False)
    assert validate(out) == []


def test_one_more_than_the_limit() -> None:
    out = sequentialize_fan_in(fan_in(4), 3)
    assert edges(out) == {"__merge_leaf_0": ("r0", "r1", "r2"),
                          "__merge_leaf_1": ("r3", "__merge_leaf_0"),
                          "leaf": ("__merge_leaf_1",)}


def test_limit_of_one() -> None:
    out = sequentialize_fan_in(fan_in(3), 1)
    assert edges(out) == {"__merge_leaf_0": ("r0",),
                          "__merge_leaf_1": ("r1", "__merge_leaf_0"),
                          "__merge_leaf_2": ("r2", "__merge_leaf_1"),
                          "leaf": ("__merge_leaf_2",)}


def test_transform_is_idempotent_and_bounds_every_real_task() -> None:
    once = sequentialize_fan_in(fan_in(1000), 100)
    assert sequentialize_fan_in(once, 100) is once
    assert max(len(t.depends_on) for t in once.tasks if not t.merge) <= 100
    assert max(len(t.depends_on) for t in once.tasks if t.merge) == 101
    assert sum(t.merge for t in once.tasks) == 10


def test_several_wide_tasks_sharing_parents() -> None:
    roots = tuple(join(f"r{i}") for i in range(4))
    names = tuple(r.name for r in roots)
    defn = WorkflowDef("two", (*roots, join("x", depends_on=names),
                               join("y", depends_on=names[::-1])))
    out = sequentialize_fan_in(defn, 2)
    assert edges(out)["__merge_y_0"] == ("r3", "r2")
    assert real_upstream_tasks(out, "x") == list(names)
    assert real_upstream_tasks(out, "y") == list(names[::-1])
    assert validate(out) == []


def test_tasks_that_cannot_be_rewritten_are_all_named() -> None:
    roots = tuple(join(f"r{i}") for i in range(3))
    names = tuple(r.name for r in roots)
    defn = WorkflowDef("bad", (*roots,
                               join("cond", depends_on=names, condition="inputs.r0.ok"),
                               join("any", depends_on=names, dep_policy="any"),
                               join("two", depends_on=names, dep_policy=2),
                               join("fine", depends_on=names[:2], dep_policy="any")))
    with pytest.raises(DefinitionError) as info:
        sequentialize_fan_in(defn, 2)
    problems = info.value.problems
    assert [(p.task, p.field) for p in problems] == [
        ("cond", "tasks[3].depends_on"), ("any", "tasks[4].depends_on"),
        ("two", "tasks[5].depends_on")]
    assert "has 3 dependencies, more than max_fan_in 2, and a condition" in problems[0].message
    assert "only preserves dep_policy 'all'" in problems[1].message


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_bad_limits(bad: object) -> None:
    with pytest.raises(ValueError, match="max_fan_in must be an integer of at least 1"):
        sequentialize_fan_in(fan_in(3), bad)  # type: ignore[arg-type]


def test_inline_sub_workflows_are_transformed() -> None:
    parent = WorkflowDef("p", (TaskDef("sub", workflow=SubWorkflow(definition=fan_in(3))),))
    out = sequentialize_fan_in(parent, 2)
    child = out.tasks[0].workflow
    assert child is not None and child.definition is not None
    assert edges(child.definition)["leaf"] == ("__merge_leaf_1",)
    bad = WorkflowDef("p", (TaskDef("sub", workflow=SubWorkflow(
        definition=fan_in(3, condition="inputs.r0.ok"))),))
    with pytest.raises(DefinitionError) as info:
        sequentialize_fan_in(bad, 2)
    [problem] = info.value.problems
    assert (problem.task, problem.field) == ("sub", "tasks[0].workflow.tasks[3].depends_on")
    assert problem.message.startswith("task 'leaf' of the sub-workflow: has 3 dependencies")


def test_real_upstream_tasks() -> None:
    base = WorkflowDef("w", (*fan_in(250).tasks, join("after", depends_on=("leaf", "r1"))))
    out = sequentialize_fan_in(base, 100)
    assert real_upstream_tasks(out, "leaf") == [f"r{i}" for i in range(250)]
    assert real_upstream_tasks(out, "after") == ["leaf", "r1"]
    assert real_upstream_tasks(out, "r0") == []
    assert real_upstream_tasks(out, "__merge_leaf_1") == [f"r{i}" for i in range(200)]
    assert real_upstream_tasks(base, "leaf") == [f"r{i}" for i in range(250)]
    with pytest.raises(KeyError):
        real_upstream_tasks(out, "missing")


def test_real_upstream_tasks_with_a_long_chain() -> None:
    out = sequentialize_fan_in(fan_in(20_000), 1)
    assert real_upstream_tasks(out, "leaf") == [f"r{i}" for i in range(20_000)]


def test_strongly_connected_components() -> None:
    # 0 -> 1 -> 2 -> 0, 3 -> 3 (self loops are not components), 4 -> 5 -> 4, 6 alone
    adjacency = [[1], [2], [0, 3], [3], [5], [4, 6], []]
    components = sorted(sorted(c) for c in strongly_connected(adjacency))
    assert components == [[0, 1, 2], [4, 5]]
    assert cycle_through(0, adjacency, {0, 1, 2}) == [0, 1, 2, 0]
    assert cycle_through(5, adjacency, {4, 5}) == [5, 4, 5]
    with pytest.raises(ValueError):
        cycle_through(6, adjacency, {6})


def test_cycle_through_finds_a_shortest_cycle() -> None:
    adjacency = [[1, 3], [2], [0], [0]]  # 0->1->2->0 and 0->3->0
    assert cycle_through(0, adjacency, {0, 1, 2, 3}) == [0, 3, 0]


def test_strongly_connected_handles_deep_graphs() -> None:
    n = 200_000
    chain = [[i + 1] for i in range(n - 1)] + [[]]
    assert strongly_connected(chain) == []
    ring = [[(i + 1) % n] for i in range(n)]
    [component] = strongly_connected(ring)
    assert len(component) == n

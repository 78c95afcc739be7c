"""Chain / Group / WithDelay compile to the DAG they describe and round-trip via YAML."""

from __future__ import annotations

import pytest

from dagq.compose import Chain, Group, Step, WithDelay, Workflow, task
from dagq.core.model import WorkflowDef
from dagq.core.parse import definition_to_dict, load_definition
from dagq.errors import DefinitionError
from tests.compose.sample_tasks import add, numbers, scale, total


def edges(defn: WorkflowDef) -> set[tuple[str, str]]:
    return {(dep, t.name) for t in defn.tasks for dep in t.depends_on}


def shell(name: str) -> Step:
    return task(name, cmd=f"echo {name}")


def round_trip(wf: Workflow) -> WorkflowDef:
    defn = wf.build()
    loaded = load_definition(wf.to_yaml())
    assert loaded == defn
    assert definition_to_dict(loaded) == definition_to_dict(defn)
    return loaded


def test_reference_example_compiles_to_exactly_its_edges() -> None:
    t = {i: shell(str(i)) for i in range(1, 9)}
    wf = Workflow("reference", Chain(
        t[1],
        Group(Chain(t[2], t[5]), t[3], Chain(t[4], Group(t[6], t[7]))),
        t[8],
    ))
    defn = wf.build()
    assert edges(defn) == {("1", "2"), ("1", "3"), ("1", "4"), ("2", "5"), ("4", "6"),
                           ("4", "7"), ("5", "8"), ("3", "8"), ("6", "8"), ("7", "8")}
    assert set(defn.task("8").depends_on) == {"5", "3", "6", "7"}
    assert [t.name for t in defn.tasks] == ["1", "2", "5", "3", "4", "6", "7", "8"]
    assert edges(round_trip(wf)) == edges(defn)


def test_with_delay_applies_to_the_first_tasks_of_its_step_in_seconds() -> None:
    wf = Workflow("delays", Chain(
        shell("a"),
        WithDelay(shell("b"), delay_s=1),
        WithDelay(Group(shell("c"), Chain(shell("d"), shell("e"))), delay_s=2),
        WithDelay(WithDelay(task("f", cmd="true", delay_s=0.5), delay_s=3), delay_s=4),
    ))
    defn = round_trip(wf)
    assert {t.name: t.delay_s for t in defn.tasks} == {
        "a": 0, "b": 1, "c": 2, "d": 2, "e": 0, "f": 7.5}
    assert edges(defn) == {("a", "b"), ("b", "c"), ("b", "d"), ("d", "e"), ("c", "f"),
                           ("e", "f")}


def test_nested_chains_groups_and_delays_of_functions_round_trip() -> None:
    wf = Workflow("nested", Group(
        Chain(task(numbers, n=3), Group(task(scale, factor=2), WithDelay(
            Chain(task(scale, factor=3, queue="gpu", num_retries=2), task(total)), delay_s=1.25)),
              task(total, name="grand", condition="inputs.scale_1 != null", dep_policy="any")),
        Chain(task(add, a=1, b=2, timeout_s=10), Group(task(add, a=3), task(add, a=4))),
    ), default_queue="cpu", max_parallelism=3, params={"p": [1, 2]})
    defn = round_trip(wf)
    assert defn.task("grand").depends_on == ("scale_1", "total")
    assert defn.task("scale_2").delay_s == 1.25
    assert defn.task("add_2").depends_on == ("add_1",)


def test_a_step_after_a_group_waits_for_every_sink_and_only_those() -> None:
    wf = Workflow("sinks", Chain(Group(Chain(shell("a"), shell("b")), shell("c")),
                                 Group(shell("d"), shell("e"))))
    defn = wf.build()
    assert defn.task("d").depends_on == ("b", "c")
    assert defn.task("e").depends_on == ("b", "c")


def test_top_level_steps_run_side_by_side() -> None:
    defn = Workflow("side", shell("a"), Chain(shell("b"), shell("c"))).build()
    assert edges(defn) == {("b", "c")}


def test_nesting_deeper_than_the_recursion_limit_compiles() -> None:
    step: Step = shell("leaf")
    for i in range(3000):
        step = Chain(Group(step), shell(f"after{i}")) if i % 2 else WithDelay(step, delay_s=0)
    defn = Workflow("deep", step).build()
    assert len(defn.tasks) == 1501
    assert defn.task("after1").depends_on == ("leaf",)


def test_a_group_of_ten_thousand_tasks_is_linear_in_size() -> None:
    n = 10_000
    wf = Workflow("wide", Chain(shell("start"), Group(*[task(cmd="true") for _ in range(n)]),
                                shell("end")))
    defn = wf.build()
    assert len(defn.tasks) == n + 2
    # one edge per group member in and out: 2n edges, not n^2
    assert sum(len(t.depends_on) for t in defn.tasks) == 2 * n
    # the first tasks of a step share one dependency tuple instead of copies
    members = defn.tasks[1:-1]
    assert len({id(t.depends_on) for t in members}) == 1
    assert defn.tasks[-1].depends_on == tuple(t.name for t in members)


def test_empty_workflow_is_rejected() -> None:
    with pytest.raises(DefinitionError, match="at least one step"):
        Workflow("empty")

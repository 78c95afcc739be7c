"""Mapped tasks in the pure engine: expansion, naming, fan-in, policies, conditions, caps,
nesting, retry, and the stored form (snapshots, deltas, peek)."""

from __future__ import annotations

from typing import Any

import pytest

from dagq.core import engine
from dagq.core.engine import Completion, WorkflowState
from dagq.core.engine.journal import encode_write, mark_stored
from dagq.core.engine.peek import peek
from dagq.core.mapping import MAX_ITEM_BYTES, map_spec, parse_over, with_item
from dagq.core.model import MappedOutputs, OutputRef, TaskDef, WorkflowDef
from dagq.core.params import render_kwargs
from dagq.core.parse import definition_from_dict, definition_to_dict
from dagq.errors import DefinitionError


def flow(*, over: str = "inputs.scan.files", fit: dict[str, Any] | None = None,
         reduce: dict[str, Any] | None = None, params: dict[str, Any] | None = None,
         **wf: Any) -> WorkflowDef:
    return WorkflowDef("m", (
        TaskDef("scan", {"cmd": "scan"}),
        TaskDef("fit", {"cmd": "fit {item}"}, ("scan",), map={"over": over, **(fit or {})}),
        TaskDef("reduce", {"cmd": "reduce"}, ("fit",), **(reduce or {})),
    ), params=params or {}, **wf)


def started(defn: WorkflowDef, items: Any) -> WorkflowState:
    s = engine.create(defn, "wf", 0.0)
    engine.start(s, 1.0)
    engine.apply(s, [Completion("scan", 1, True, output={"files": items})], 2.0)
    return s


def finish(s: WorkflowState, names: list[str], ok: bool = True, now: float = 3.0,
           output: Any = None) -> engine.Effects:
    return engine.apply(s, [Completion(n, s.task_view(n).attempt, ok, output=output,
                                       error=None if ok else "boom") for n in names], now)


def statuses(s: WorkflowState) -> dict[str, str]:
    return {v.name: v.status for v in s.iter_task_views()}


def test_expansion_names_each_instance_and_completes_the_head() -> None:
    s = started(flow(), ["a", "b", "c"])
    assert statuses(s) == {"scan": "completed", "fit": "completed", "reduce": "pending",
                           "fit[0]": "running", "fit[1]": "running", "fit[2]": "running"}
    assert s.task_view("fit").note == "mapped over 3 items"
    assert [s.item_of(s.graph.index[f"fit[{k}]"]) for k in range(3)] == [
        (True, "a"), (True, "b"), (True, "c")]
    assert s.item_of(s.graph.index["scan"]) == (False, None)
    assert s.task_def("fit[1]").name == "fit"


def test_dependents_wait_for_every_instance_and_read_one_ordered_list() -> None:
    s = started(flow(), ["a", "b", "c"])
    for k in (2, 0):
        finish(s, [f"fit[{k}]"], output={"k": k})
    assert s.task_view("reduce").status == "pending"
    fx = finish(s, ["fit[1]"], output={"k": 1})
    assert [d.task for d in fx.dispatched] == ["reduce"]
    got = s.inputs_of("reduce")
    assert got == {"fit": [{"k": 0}, {"k": 1}, {"k": 2}]} and type(got["fit"]) is MappedOutputs


def test_an_empty_list_makes_no_instance_and_the_dependent_runs_with_an_empty_list() -> None:
    s = started(flow(), [])
    assert statuses(s) == {"scan": "completed", "fit": "completed", "reduce": "running"}
    assert s.task_view("fit").note == "mapped over 0 items"
    assert s.inputs_of("reduce") == {"fit": []}
    finish(s, ["reduce"])
    assert s.status == "completed"


def test_one_item_of_objects_renders_fields_quoted_for_the_shell() -> None:
    defn = flow(fit={}, params={})
    s = started(defn, [{"path": "a b;rm -rf /", "n": 3}])
    i = s.graph.index["fit[0]"]
    assert s.item_of(i) == (True, {"path": "a b;rm -rf /", "n": 3})
    kwargs, values = with_item({"cmd": "train --path {item.path} --n {item.n} '{item}'",
                                "args": {"x": "{item}"}, "env": {"P": "{{item}}"}},
                               s.item_of(i)[1])
    out = render_kwargs(kwargs, values)
    assert out["cmd"] == ("train --path 'a b;rm -rf /' --n '3' "
                          "'{\"path\":\"a b;rm -rf /\",\"n\":3}'")
    assert out["args"] == {"x": {"path": "a b;rm -rf /", "n": 3}}
    assert out["env"] == {"P": "{item}"}
    with pytest.raises(ValueError, match="has no field 'missing'"):
        with_item({"cmd": "x {item.missing}"}, {"path": "p"})


@pytest.mark.parametrize(("items", "why"), [
    ({"a": 1}, "expected a list, got"),
    (list(range(11)), "11 items, more than max_items (10)"),
    (["x" * (MAX_ITEM_BYTES + 1)], "item 0 is"),
])
def test_items_that_cannot_be_mapped_fail_the_head_with_the_reason(items: Any,
                                                                   why: str) -> None:
    s = started(flow(fit={"max_items": 10}), items)
    view = s.task_view("fit")
    assert view.status == "failed" and why in (view.error or "")
    assert statuses(s)["reduce"] == "upstream_failed" and s.status == "failed"
    assert len(s.st) == 3  # no instance was made


def test_a_missing_field_on_the_path_names_the_path() -> None:
    s = engine.create(flow(over="inputs.scan.nope"), "wf", 0.0)
    engine.start(s, 1.0)
    engine.apply(s, [Completion("scan", 1, True, output={"files": []})], 2.0)
    assert s.task_view("fit").error == (
        "map over inputs.scan.nope: a mapping has no field 'nope' (its fields: files)")


def test_retry_runs_only_the_failed_instances_again() -> None:
    s = started(flow(), ["a", "b", "c"])
    finish(s, ["fit[0]", "fit[2]"])
    finish(s, ["fit[1]"], ok=False)
    assert s.status == "failed" and statuses(s)["reduce"] == "upstream_failed"
    fx = engine.retry(s, 4.0, "r1")
    assert [(d.task, d.attempt) for d in fx.dispatched] == [("fit[1]", 2)]
    finish(s, ["fit[1]"], output=1, now=5.0)
    finish(s, ["reduce"], now=6.0)
    assert s.status == "completed"
    assert {v.name: v.attempt for v in s.iter_task_views()}["fit[0]"] == 1


@pytest.mark.parametrize(("policy", "fails", "expect"), [
    ("any", [0, 1], "running"),
    (2, [0], "running"),
    (3, [0], "upstream_failed"),
    (5, [], "upstream_failed"),  # more than the 3 instances: can never be met
])
def test_dependency_policies_count_instances(policy: Any, fails: list[int],
                                             expect: str) -> None:
    s = started(flow(reduce={"dep_policy": policy}), ["a", "b", "c"])
    finish(s, [f"fit[{k}]" for k in fails], ok=False)
    finish(s, [f"fit[{k}]" for k in range(3) if k not in fails])
    assert statuses(s)["reduce"] == expect


def test_an_integer_policy_above_the_static_count_is_valid_after_a_map() -> None:
    data = definition_to_dict(flow(reduce={"dep_policy": 3}))
    assert definition_from_dict(data).task("reduce").dep_policy == 3
    data["tasks"][1].pop("map")
    with pytest.raises(DefinitionError, match="can never be met"):
        definition_from_dict(data)


def test_conditions_aggregate_over_the_instances_outputs() -> None:
    cond = {"condition": "all(inputs.fit.loss < 0.1) and count(inputs.fit.loss < 0.05) >= 1"}
    s = started(flow(reduce=cond), [1, 2])
    finish(s, ["fit[0]"], output={"loss": 0.01})
    finish(s, ["fit[1]"], output={"loss": 0.09})
    assert statuses(s)["reduce"] == "running"
    s = started(flow(reduce=cond), [1, 2])
    finish(s, ["fit[0]"], output={"loss": 0.01})
    finish(s, ["fit[1]"], output={"loss": 0.5})
    assert statuses(s)["reduce"] == "skipped"


def test_conditions_resolve_stored_instance_outputs() -> None:
    ref = OutputRef("outputs/wf/fit[0]/1.json", "md5", 10)
    s = started(flow(reduce={"condition": "all(inputs.fit.loss < 0.1)"}), [1, 2])
    engine.apply(s, [Completion("fit[0]", 1, True, output_ref=ref),
                     Completion("fit[1]", 1, True, output={"loss": 0.01})], 3.0,
                 resolve=lambda r: {"loss": 0.02})
    assert statuses(s)["reduce"] == "running"


def test_a_head_condition_that_is_false_skips_the_whole_map() -> None:
    defn = WorkflowDef("m", (
        TaskDef("scan", {"cmd": "x"}),
        TaskDef("fit", {"cmd": "x"}, ("scan",), condition="inputs.scan.go",
                map={"over": "inputs.scan.files"}),
        TaskDef("reduce", {"cmd": "x"}, ("fit",))))
    s = engine.create(defn, "wf", 0.0)
    engine.start(s, 1.0)
    engine.apply(s, [Completion("scan", 1, True, output={"go": False, "files": [1]})], 2.0)
    assert statuses(s) == {"scan": "completed", "fit": "skipped", "reduce": "running"}


def test_nested_maps_run_one_instance_per_output_of_the_first() -> None:
    defn = WorkflowDef("n", (
        TaskDef("scan", {"cmd": "x"}),
        TaskDef("a", {"cmd": "a {item}"}, ("scan",), map={"over": "inputs.scan.files"}),
        TaskDef("b", {"cmd": "b {item.v}"}, ("a",), map={"over": "inputs.a"}),
        TaskDef("end", {"cmd": "x"}, ("b",))))
    s = started(defn, ["x", "y"])
    finish(s, ["a[1]"], output={"v": "Y"})
    assert "b[0]" not in s.graph.index  # waits for every instance of a
    finish(s, ["a[0]"], output={"v": "X"})
    assert [s.item_of(s.graph.index[f"b[{k}]"])[1] for k in range(2)] == [
        {"v": "X"}, {"v": "Y"}]
    finish(s, ["b[0]", "b[1]"], output=7)
    assert s.inputs_of("end") == {"b": [7, 7]}
    finish(s, ["end"])
    assert s.status == "completed"


def test_a_map_over_a_parameter_expands_at_start() -> None:
    defn = WorkflowDef("p", (
        TaskDef("fit", {"cmd": "fit {item}"}, map={"over": "params.files"}),
        TaskDef("reduce", {"cmd": "x"}, ("fit",))), params={"files": ["f1", "f2"]},
        parameters={"files": {"type": "array"}})
    s = engine.create(defn, "wf", 0.0)
    fx = engine.start(s, 1.0)
    assert [d.task for d in fx.dispatched] == ["fit[0]", "fit[1]"]
    assert fx.expanded == [("fit", 2)]


def test_a_map_of_its_own_parallelism_runs_at_most_that_many_instances() -> None:
    s = started(flow(fit={"max_parallelism": 2}), list(range(5)))
    running = [n for n, st in statuses(s).items() if st == "running"]
    assert running == ["fit[0]", "fit[1]"]
    for step in range(4):
        first = next(n for n, st in statuses(s).items() if st == "running" and "[" in n)
        finish(s, [first], ok=step != 1, now=3.0 + step)
        now_running = [n for n, st in statuses(s).items() if st == "running" and "[" in n]
        assert len(now_running) <= 2
    # a reloaded state keeps the cap
    s2 = engine.loads(engine.dumps(s))
    while any(st == "running" and "[" in n for n, st in statuses(s2).items()):
        first = next(n for n, st in statuses(s2).items() if st == "running" and "[" in n)
        finish(s2, [first], now=9.0)
        assert sum(st == "running" and "[" in n for n, st in statuses(s2).items()) <= 2
    assert sorted(st for n, st in statuses(s2).items() if "[" in n) == [
        "completed"] * 4 + ["failed"]
    fx = engine.retry(s2, 10.0, "r")
    assert [d.task for d in fx.dispatched] == ["fit[1]"]


def test_the_workflow_cap_and_the_map_cap_hold_together() -> None:
    s = started(flow(fit={"max_parallelism": 3}, max_parallelism=2), list(range(6)))
    assert sum(st == "running" for st in statuses(s).values()) == 2
    while s.status == "running" and s.running():
        name, _ = s.running()[0]
        finish(s, [name])
        assert len(s.running()) <= 2
    assert s.status == "completed"


def test_cancel_stops_running_instances_and_cancels_the_rest() -> None:
    s = started(flow(fit={"max_parallelism": 1}), ["a", "b"])
    fx = engine.cancel(s, 3.0)
    assert fx.stop == [("fit[0]", 1)]
    assert statuses(s)["fit[1]"] == "cancelled"
    finish(s, ["fit[0]"], ok=False)
    assert s.status == "cancelled"


@pytest.mark.parametrize("via_delta", [False, True])
def test_expansions_survive_snapshots_and_deltas(via_delta: bool) -> None:
    defn = flow()
    s = engine.create(defn, "wf", 0.0)
    engine.start(s, 1.0)
    base = engine.dumps(s)
    engine.apply(s, [Completion("scan", 1, True, output={"files": list("abcd")})], 2.0)
    if via_delta:
        s.snapshot_bytes = 10 ** 9  # force a delta whatever the sizes
        kind, delta = encode_write(s, max_entries=100, min_bytes=0)
        s.dirty.clear()
        assert kind in ("append", "replace")
        data = base + delta if kind == "append" else delta
    else:
        data = engine.dumps(s)
    s2 = engine.loads(data)
    assert statuses(s2) == statuses(s) and s2.maps == s.maps
    assert s2.graph.names == s.graph.names and s2.inputs_of("fit[1]") == {}
    facts = peek(data)
    assert facts.judge("fit[3]", 1, "wf/fit[3]/1") == "run"
    mark_stored(s2, len(data))
    finish(s2, ["fit[0]", "fit[1]", "fit[2]", "fit[3]"])
    assert statuses(s2)["reduce"] == "running"


def test_a_delta_after_an_expansion_replays_on_a_stored_snapshot() -> None:
    s = engine.create(flow(), "wf", 0.0)
    engine.start(s, 1.0)
    s.definition  # noqa: B018 - the definition is encoded with the first snapshot
    snap = engine.dumps(s)
    engine.apply(s, [Completion("scan", 1, True, output={"files": list(range(3))})], 2.0)
    s.snapshot_bytes = 10 ** 9
    from dagq.core.engine.journal import encode_delta
    data = snap + encode_delta(s)
    s2 = engine.loads(data)
    assert statuses(s2) == statuses(s)
    assert peek(data).judge("fit[2]", 1, "wf/fit[2]/1") == "run"
    assert peek(data, peek(snap)).judge("fit[2]", 1, "wf/fit[2]/1") == "run"


def test_the_map_field_round_trips_and_is_validated() -> None:
    data = definition_to_dict(flow(fit={"max_parallelism": 4}))
    assert data["tasks"][1]["map"] == {"over": "inputs.scan.files", "max_parallelism": 4}
    assert definition_from_dict(data) == flow(fit={"max_parallelism": 4})
    data["tasks"][1]["map"] = {"over": "inputs.nope"}
    with pytest.raises(DefinitionError, match="'nope' is not in depends_on"):
        definition_from_dict(data)
    data["tasks"][1]["map"] = {"over": "scan.files"}
    with pytest.raises(DefinitionError, match=r"map\.over must be a path"):
        definition_from_dict(data)


def test_over_paths_parse() -> None:
    assert parse_over('inputs["scan-1"].rows[0]') == ("inputs", "scan-1", ("rows", 0))
    assert map_spec({"over": "params.files"}).source == "params"


def test_item_placeholders_are_checked_where_they_stand() -> None:
    data = definition_to_dict(flow())
    data["tasks"][1]["kwargs"] = {"cmd": "echo `{item.x}`"}
    with pytest.raises(DefinitionError, match=r"\{item.x\} stands inside backquotes"):
        definition_from_dict(data)
    data["tasks"][1]["kwargs"] = {"cmd": "echo {item.x} \"{item}\" '{{item}}'"}
    assert definition_from_dict(data).task("fit").kwargs["cmd"].startswith("echo")


def test_a_sub_workflow_cannot_be_mapped() -> None:
    data = definition_to_dict(flow())
    data["tasks"][1] = {"name": "fit", "depends_on": ["scan"],
                        "map": {"over": "inputs.scan.files"},
                        "workflow": {"name": "c", "tasks": [{"name": "x",
                                                             "kwargs": {"cmd": "true"}}]}}
    with pytest.raises(DefinitionError, match="map works on tasks that run a command"):
        definition_from_dict(data)

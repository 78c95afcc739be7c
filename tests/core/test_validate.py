"""Semantic validation of definitions built in Python (no source file involved)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from dagq.core.model import SubWorkflow, TaskDef, WorkflowDef
from dagq.core.rules import queue_problem, task_name_problem
from dagq.core.validate import validate
from dagq.errors import Problem
from tests.fixtures.definitions import join


def wf(*tasks: TaskDef, **fields: Any) -> WorkflowDef:
    return WorkflowDef(name=fields.pop("name", "w"), tasks=tasks, **fields)


def only(defn: WorkflowDef) -> Problem:
    problems = validate(defn)
    assert len(problems) == 1, problems
    return problems[0]


def test_valid_definition_has_no_problems() -> None:
    defn = wf(TaskDef("a", kwargs={"cmd": "x", "env": {"A": "1", "N": 2}, "cwd": "/"}),
              join("b", depends_on=("a",), dep_policy=1, condition="inputs.a.ok"),
              join("c", depends_on=("a", "b"), dep_policy="any", queue="gpu-a100"),
              join("prep/featurize", depends_on=("c",), timeout_s=1, delay_s=0))
    assert validate(defn) == []


def test_empty_and_duplicate_names() -> None:
    problems = validate(wf(join(""), join("a"), join("a"), name=""))
    assert [(p.field, p.task) for p in problems] == [
        ("name", None), ("tasks[0].name", None), ("tasks[2].name", "a")]
    assert problems[2].message == ("duplicate task name 'a' (first defined at tasks[1]); "
                                   "task names must be unique")


def test_unknown_self_and_repeated_dependencies() -> None:
    problems = validate(wf(join("train"), join("b", depends_on=("trian", "b", "train",
                                                                      "train"))))
    assert [(p.field, p.message) for p in problems] == [
        ("tasks[1].depends_on[0]", "depends on unknown task 'trian'; did you mean 'train'?"),
        ("tasks[1].depends_on[1]", "a task cannot depend on itself"),
        ("tasks[1].depends_on[3]", "'train' is listed twice in depends_on"),
    ]


def test_cycle_is_printed_as_a_path() -> None:
    problem = only(wf(join("a", depends_on=("c",)), join("b", depends_on=("a",)),
                      join("c", depends_on=("b",)), join("d", depends_on=("a",))))
    assert problem.message == "dependency cycle: a -> c -> b -> a (each task depends on the next)"
    assert (problem.task, problem.field) == ("a", "tasks[0].depends_on")


def test_every_strongly_connected_component_is_reported() -> None:
    problems = validate(wf(join("a", depends_on=("b",)), join("b", depends_on=("a", "c")),
                           join("c", depends_on=("b",)), join("x", depends_on=("y",)),
                           join("y", depends_on=("x",))))
    assert sorted(p.message for p in problems) == [
        "dependency cycle: a -> b -> a (each task depends on the next); "
        "1 more task(s) are on cycles with these",
        "dependency cycle: x -> y -> x (each task depends on the next)",
    ]


def test_huge_cycle_and_chain_do_not_recurse() -> None:
    n = 100_000
    chain = wf(*(join(f"n{i}", depends_on=(f"n{i - 1}",) if i else ()) for i in range(n)))
    assert validate(chain) == []
    ring = wf(*(join(f"n{i}", depends_on=(f"n{(i + 1) % n}",)) for i in range(n)))
    problem = only(ring)
    assert problem.message == ("dependency cycle: n0 -> n1 -> n2 -> n3 -> n4 -> n5 -> "
                               "... (99991 more) -> n99997 -> n99998 -> n99999 -> n0 "
                               "(each task depends on the next)")


@pytest.mark.parametrize(("policy", "deps", "message"), [
    (0, ("a",), "dep_policy must be at least 1, got 0"),
    (3, ("a", "b"), "dep_policy 3 can never be met: the task has only 2 dependencies"),
    (1, (), "dep_policy 1 can never be met: the task has only 0 dependencies"),
    (True, ("a",), "dep_policy must be 'all', 'any' or a positive integer, got a boolean (true)"),
    (1.0, ("a",), "dep_policy must be 'all', 'any' or a positive integer, got 1.0"),
    ("2", ("a", "b"), "dep_policy must be 'all', 'any' or a positive integer, got '2'; "
                      "write the number without quotes"),
    ("al", ("a",), "dep_policy must be 'all', 'any' or a positive integer, got 'al'; "
                   "did you mean 'all'?"),
])
def test_bad_dep_policies(policy: Any, deps: tuple[str, ...], message: str) -> None:
    problem = only(wf(join("a"), join("b"), join("t", depends_on=deps,
                                                          dep_policy=policy)))
    assert (problem.message, problem.field, problem.task) == (message, "tasks[2].dep_policy", "t")


@pytest.mark.parametrize("policy", ["all", "any"])
def test_named_policies_need_no_dependencies(policy: Any) -> None:
    assert validate(wf(join("a", dep_policy=policy))) == []


def test_condition_problems() -> None:
    problems = validate(wf(
        join("a"), join("b"),
        join("syntax", depends_on=("a",), condition="inputs.a.x < "),
        join("not-direct", depends_on=("a",), condition="inputs.b.ok"),
        join("no-deps", condition="true"),
        join("not-string", depends_on=("a",), condition=5),  # type: ignore[arg-type]
        join("glob", depends_on=("a",), condition='all(inputs["train-*"].ok)'),
    ))
    by_task = {p.task: p.message for p in problems}
    assert len(by_task) == len(problems) == 5
    assert by_task["syntax"].startswith("invalid condition: ")
    assert "^" in by_task["syntax"]  # points at the offending token
    assert "'b', which is not a direct dependency" in by_task["not-direct"]
    assert by_task["no-deps"].startswith("a condition needs dependencies")
    assert by_task["not-string"] == "condition must be a string, got 5"
    assert "matches none of the dependencies" in by_task["glob"]
    assert all(p.field and p.field.endswith(".condition") for p in problems)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("num_retries", -1, "num_retries must be an integer of 0 or more, got -1"),
    ("num_retries", True, "num_retries must be an integer of 0 or more, got a boolean (true)"),
    ("num_retries", 1.0, "num_retries must be an integer of 0 or more, got 1.0"),
    ("timeout_s", 0, "timeout_s must be a number greater than 0, got 0"),
    ("timeout_s", math.inf, "timeout_s must be a number greater than 0, got inf"),
    ("timeout_s", False, "timeout_s must be a number greater than 0, got a boolean (false)"),
    ("delay_s", -0.5, "delay_s must be a number 0 or more, got -0.5"),
    ("delay_s", math.nan, "delay_s must be a number 0 or more, got nan"),
    ("retry_backoff_s", "1", "retry_backoff_s must be a number 0 or more, got a string ('1')"),
    ("retry_backoff_max_s", None, "retry_backoff_max_s must be a number 0 or more, got null"),
    ("kwargs", [], "kwargs must be a mapping, got a list"),
    ("depends_on", "a", "depends_on must be a list of task names, got a string ('a')"),
    ("depends_on", (1,), "dependencies must be task names, got 1"),
    ("merge", 1, "merge must be true or false, got 1"),
])
def test_wrong_task_field_types(field: str, value: Any, message: str) -> None:
    extra = {} if field in ("kwargs", "merge") else {"kind": "noop"}
    problem = only(wf(TaskDef("t", **{field: value}, **extra)))  # type: ignore[arg-type]
    assert problem.message == message
    assert problem.field is not None and problem.field.startswith(f"tasks[0].{field}")


@pytest.mark.parametrize(("fields", "field", "start"), [
    ({"max_parallelism": 0}, "max_parallelism", "max_parallelism must be an integer of at least"),
    ({"max_parallelism": True}, "max_parallelism", "max_parallelism must be an integer"),
    ({"default_task_timeout_s": -1}, "default_task_timeout_s", "default_task_timeout_s must be"),
    ({"result_policy": "all_sink_succeed"}, "result_policy", "result_policy must be one of"),
    ({"params": []}, "params", "params must be a mapping"),
    ({"description": 3}, "description", "description must be a string"),
    ({"default_queue": "GPU"}, "default_queue", "queue name 'GPU' is not allowed"),
])
def test_wrong_workflow_field_types(fields: dict[str, Any], field: str, start: str) -> None:
    problem = only(wf(join("t"), **fields))
    assert problem.field == field and problem.message.startswith(start)


def test_result_policy_suggestion() -> None:
    problem = only(wf(join("t"), result_policy="all_task_succeed"))
    assert problem.message.endswith("did you mean 'all_tasks_succeed'?")


def test_empty_or_wrong_task_list() -> None:
    assert only(wf()).message == "a workflow needs at least one task"
    bad = WorkflowDef("w", (join("a"), "b"))  # type: ignore[arg-type]
    assert only(bad).field == "tasks[1]"


@pytest.mark.parametrize(("queue", "ok"), [
    ("a", True), ("gpu-a100", True), ("0cpu", True), ("x" * 36, True), ("x" * 37, False),
    ("", False), ("-cpu", False), ("cpu-", False), ("cpu--x", False), ("Cpu", False),
    ("cpu_x", False), ("cpu.x", False),
])
def test_queue_names(queue: str, ok: bool) -> None:
    problem = queue_problem(queue)
    assert (problem is None) == ok
    if problem:
        assert "queue names become Azure queue names" in problem


def test_queue_name_suggestion() -> None:
    problem = only(wf(join("t", queue="GPU_A100")))
    assert problem.message.endswith("did you mean 'gpu-a100'?")
    assert problem.field == "tasks[0].queue"


@pytest.mark.parametrize(("name", "fragment"), [
    ("prep/featurize", None),
    ("train-ü", None),
    ("x" * 200, None),
    ("x" * 201, "the limit is 200"),
    ("a#b", "'#'"),
    ("a?b", "'?'"),
    ("a\\b", "'\\\\'"),
    ("a\tb", "U+0009"),
    ("a\x85b", "U+0085"),
    (" a", "whitespace"),
    ("__merge_x", "reserved"),
    (5, "must be a string"),
])
def test_task_names(name: Any, fragment: str | None) -> None:
    problem = task_name_problem(name)
    if fragment is None:
        assert problem is None
    else:
        assert problem is not None and fragment in problem


def test_kwargs_must_be_plain_json() -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    problems = validate(wf(
        TaskDef("set", kwargs={"cmd": "true", "x_s": {1, 2}}),
        TaskDef("key", kwargs={"cmd": "true", "env": {1: "x"}}),
        TaskDef("nan", kwargs={"cmd": "true", "x_x": [1.0, math.nan]}),
        TaskDef("cyclic", kwargs={"cmd": "true", "x_c": cyclic}),
        TaskDef("tuple-ok", kwargs={"cmd": "true", "x_t": (1, "a", None, True)}),
    ))
    assert [(p.task, p.field) for p in problems] == [
        ("set", "tasks[0].kwargs.x_s"),
        ("key", "tasks[1].kwargs.env"),
        ("nan", "tasks[2].kwargs.x_x[1]"),
        ("cyclic", "tasks[3].kwargs.x_c" + ".self" * 63),
    ]


def test_well_known_kwargs() -> None:
    problems = validate(wf(TaskDef("t", kwargs={"cmd": " ", "env": ["A=1"], "cwd": 3})))
    assert [p.field for p in problems] == ["tasks[0].kwargs.cmd", "tasks[0].kwargs.env",
                                           "tasks[0].kwargs.cwd"]


def test_sub_workflows() -> None:
    child = wf(join("x", depends_on=("y",)), name="child")
    problems = validate(wf(
        TaskDef("inline", workflow=SubWorkflow(definition=child, params={"p": 1})),
        TaskDef("both", workflow=SubWorkflow(path="a.yaml", factory="m:f")),
        TaskDef("none", workflow=SubWorkflow()),
        TaskDef("empty-path", workflow=SubWorkflow(path="")),
        TaskDef("bad-factory", workflow=SubWorkflow(factory="no colon")),
        TaskDef("with-cmd", kwargs={"cmd": "x"}, workflow=SubWorkflow(path="a.yaml")),
        TaskDef("bad-params", workflow=SubWorkflow(path="a.yaml", params=[])),  # type: ignore
    ))
    assert [(p.task, p.field) for p in problems] == [
        ("inline", "tasks[0].workflow.tasks[0].depends_on[0]"),
        ("both", "tasks[1].workflow"),
        ("none", "tasks[2].workflow"),
        ("empty-path", "tasks[3].workflow"),
        ("bad-factory", "tasks[4].workflow"),
        ("with-cmd", "tasks[5].kwargs"),
        ("bad-params", "tasks[6].params"),
    ]
    assert problems[0].message == "task 'x' of the sub-workflow: depends on unknown task 'y'"
    assert validate(wf(TaskDef("f", workflow=SubWorkflow(factory="pkg.mod:make")))) == []


def test_merge_nodes() -> None:
    ok = wf(join("a"), TaskDef("__merge_b_0", depends_on=("a",), merge=True),
            join("b", depends_on=("__merge_b_0",)))
    assert validate(ok) == []
    assert "merge nodes must be named" in only(wf(TaskDef("m", merge=True))).message
    problem = only(wf(join("a"), TaskDef("__merge_x", depends_on=("a",), merge=True,
                                            kwargs={"cmd": "x"})))
    assert problem.message.endswith("remove kwargs")


def test_problems_of_all_kinds_come_together() -> None:
    problems = validate(wf(join("a", num_retries=-1, depends_on=("zz",)),
                           join("a", queue="Q"), join("c", depends_on=("c",)),
                           max_parallelism=0))
    assert len(problems) == 6


@pytest.mark.parametrize(("value", "words"), [
    (5, "directory path or a mapping"),
    ({"every_s": 2}, "non-empty directory path"),
    ({"path": "ckpt", "every_s": 0}, "every_s must be seconds above 0"),
    ({"path": "ckpt", "dest": "../x"}, "relative name"),
    ({"path": "ckpt", "often": 1}, "unknown key(s) often"),
])
def test_bad_dirsync_specs_are_reported(value: object, words: str) -> None:
    from dagq.core.model import TaskDef, WorkflowDef
    from dagq.core.validate import validate

    defn = WorkflowDef("w", (TaskDef("t", {"cmd": "true", "bg_dirsync_to": value}),))
    problems = validate(defn)
    assert any(words in p.message and p.task == "t" for p in problems), problems


def test_good_dirsync_specs_pass() -> None:
    from dagq.core.model import TaskDef, WorkflowDef
    from dagq.core.validate import validate

    for value in ("ckpt", {"path": "/abs", "every_s": 1.5, "dest": "run/ckpt"}):
        defn = WorkflowDef("w", (TaskDef("t", {"cmd": "true", "bg_dirsync_to": value}),))
        assert validate(defn) == []


@pytest.mark.parametrize("queue", ["completions", "deadletter"])
def test_reserved_queue_names_are_refused(queue: str) -> None:
    from dagq.core.model import TaskDef, WorkflowDef
    from dagq.core.validate import validate

    defn = WorkflowDef("w", (TaskDef("t", {"cmd": "true"}, queue=queue),))
    assert any("reserved" in p.message for p in validate(defn))
    defn = WorkflowDef("w", (join("t", {"cmd": "true"}),), default_queue=queue)
    assert any("reserved" in p.message for p in validate(defn))


@pytest.mark.parametrize("field", ["delay_s", "retry_backoff_s", "retry_backoff_max_s",
                                   "timeout_s"])
def test_an_integer_too_large_for_a_float_is_reported_not_raised(field: str) -> None:
    task = TaskDef(**{"name": "a", "kwargs": {"cmd": "true"}, field: 10 ** 400})
    problems = validate(WorkflowDef(name="w", tasks=(task,)))
    assert [p.field for p in problems] == [f"tasks[0].{field}"]
    assert "an integer of 401 digits" in problems[0].message

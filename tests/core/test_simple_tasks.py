"""The cheap look at plain tasks never changes what validation reports.

``simple_tasks`` lets validation skip the per-task checks of tasks it marks; these tests
generate tasks at and around every boundary those checks draw and require the problems
found with the shortcut to equal the problems found without it.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dagq.core import parse
from dagq.core import validate as validate_module
from dagq.core.kinds import TaskKind, registered_kind
from dagq.core.model import TaskDef, WorkflowDef
from dagq.core.rules import MAX_NAME_LENGTH, RESERVED_QUEUES
from dagq.core.simple_tasks import simple_tasks
from dagq.core.task_checks import MAX_DELAY_S, MAX_TIMEOUT_S
from dagq.errors import Problem

TEXTS = ["true", "", " ", "echo {params.x}", "echo {params.nope}", "a\x00b", "é", "\udc80",
         "{{params.x}}", "x\n", "python train.py --shard 7"]
NAMES: list[Any] = ["t", "t.", ".t", "t.x", "t-1", "__merge_x", "a*b", "a[0]",
                    "x" * (MAX_NAME_LENGTH - 1), "x" * MAX_NAME_LENGTH,
                    "x" * (MAX_NAME_LENGTH + 1), "t t", " t", "é",
                    "\ud800", "", 5, "a?b", "a/b", "a#b", "a\x01", "~t", "a", "..", "."]
SECONDS: list[Any] = [0, 0.0, -0.0, -1, 1.5, MAX_DELAY_S, MAX_DELAY_S + 1, MAX_TIMEOUT_S,
                      MAX_TIMEOUT_S + 0.5, math.nan, math.inf, True, False, "1", 10 ** 400, None]

BOUNDARIES_RETRIES: list[Any] = [-1, True, False, 0.0, 1.0, 10 ** 14, 10 ** 15, 10 ** 20,
                                  10 ** 4400, None]
scalars = st.one_of(st.sampled_from(TEXTS), st.sampled_from([0, -1, 10 ** 15, 10 ** 4400, 1.5,
                                                              math.nan, True, None]))
env = st.dictionaries(st.sampled_from(["A", "_B", "1A", "A=B", "", "a\x01", "é"]),
                      st.one_of(st.sampled_from(TEXTS), st.sampled_from([1, None, 2.5])),
                      max_size=3)
arg_dicts = st.dictionaries(st.sampled_from(["n", "_x", "1n", "a b", "x\x01", "\udc80"]),
                            st.one_of(scalars, st.just({"deep": [1]})), max_size=3)
args = st.one_of(st.none(), st.sampled_from([[], "x"]), arg_dicts, arg_dicts, arg_dicts)
PLAIN_KWARGS: list[dict[str, Any]] = [
    {"cmd": "true"}, {"cmd": "run", "env": {"A": "1"}, "cwd": "/d"},
    {"call": "pkg.mod:fn", "args": {"n": 1}}, {"cmd": "x", "gpus": 2}, {"call": "m:f"}]
KEY_MOVES: dict[str, st.SearchStrategy[Any]] = {
    "cmd": st.one_of(st.sampled_from(TEXTS), st.just(["ls"])),
    "call": st.sampled_from(["pkg.mod:fn", "pkg:fn", "pkg.mod", "pkg.mod:fn {params.x}", 5]),
    "args": args,
    "env": st.one_of(env, st.just("A=1")),
    "cwd": st.one_of(st.sampled_from(TEXTS), st.just(3)),
    "gpus": st.sampled_from([-1, 0, 1, 64, 65, True, 1.0]),
    "bg_dirsync_to": st.just("ckpt"),
    "x-note": st.just("kept"),
    "bogus": st.just(1),
}


@st.composite
def moved_kwargs(draw: st.DrawFn) -> dict[str, Any]:
    """Plain kwargs with one or two keys set to (or added with) a boundary value, or
    removed."""
    out = dict(draw(st.sampled_from(PLAIN_KWARGS)))
    for key in draw(st.sets(st.sampled_from(sorted(KEY_MOVES)), min_size=1, max_size=2)):
        if key in out and draw(st.booleans()):
            del out[key]
        else:
            out[key] = draw(KEY_MOVES[key])
    return out


FIELDS: dict[str, tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]] = {
    # field: (plain values, values at and across the boundaries)
    "name": (st.sampled_from(["t", "t-1", "t.x", "~t", "T_2"]), st.sampled_from(NAMES)),
    "kwargs": (st.sampled_from(PLAIN_KWARGS).map(dict),
               st.one_of(moved_kwargs(), st.sampled_from([["cmd"], "cmd", None]))),
    "depends_on": (st.sampled_from([(), ("a",), ("a", "b")]),
                   st.one_of(st.lists(st.sampled_from(["a", "b", "zz", "t"]),
                                      max_size=3).map(tuple),
                             st.sampled_from([("a", 5), ["a"], ("é",), ("\udc80",)]))),
    "queue": (st.sampled_from([None, "gpu"]),
              st.sampled_from(["GPU", "a" * 36, "a" * 37, "-a", "a--b", "", *RESERVED_QUEUES, 5])),
    "dep_policy": (st.sampled_from(["all", "any"]),
                   st.sampled_from(["none", "2", "", 0, 1, 2, 3, True, 1.0, None])),
    "condition": (st.just(None), st.sampled_from(["true", "inputs.a.ok", "(", 3])),
    "num_retries": (st.sampled_from([0, 3]),
                    st.sampled_from(BOUNDARIES_RETRIES)),
    "retry_backoff_s": (st.sampled_from([0.0, 2]), st.sampled_from(SECONDS)),
    "retry_backoff_max_s": (st.sampled_from([600.0, 60]), st.sampled_from(SECONDS)),
    "timeout_s": (st.sampled_from([None, 30.0]), st.sampled_from(SECONDS)),
    "delay_s": (st.sampled_from([0.0, 1]), st.sampled_from(SECONDS)),
    "merge": (st.just(False), st.sampled_from([True, 0, None])),
    "kind": (st.just(None), st.sampled_from(["noop", "shell", "function", "bogus", "merge", 3])),
}


@st.composite
def tasks(draw: st.DrawFn, moved: int = 3, only: str | None = None) -> TaskDef:
    """A plain task with up to ``moved`` fields (or just the field ``only``) moved to a
    boundary value."""
    moved_fields = {only} if only else draw(st.sets(st.sampled_from(sorted(FIELDS)),
                                                    max_size=moved))
    values = {name: draw(bad if name in moved_fields else good)
              for name, (good, bad) in FIELDS.items()}
    return TaskDef(**values)


def problems(defn: WorkflowDef, shortcut: bool, monkeypatch: pytest.MonkeyPatch) -> list[Problem]:
    with monkeypatch.context() as m:
        if not shortcut:
            m.setattr(validate_module, "simple_tasks", lambda ts: bytearray(len(ts)))
        return validate_module.check(defn, validate_module.SourceMap())


def workflow(*extra: TaskDef) -> WorkflowDef:
    base = (TaskDef("a", {"cmd": "true"}), TaskDef("b", {"call": "pkg.mod:fn"}))
    return WorkflowDef(name="w", tasks=(*base, *extra), params={"x": 1})


SETTINGS = settings(max_examples=1000, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


@SETTINGS
@given(task=tasks())
def test_the_shortcut_reports_exactly_what_the_full_checks_report(
        task: TaskDef, monkeypatch: pytest.MonkeyPatch) -> None:
    event("simple" if same_problems_either_way(task, monkeypatch) else "checked in full")


@SETTINGS
@given(task=tasks(only="kwargs"))
def test_the_shortcut_reports_what_the_full_checks_report_of_kwargs(
        task: TaskDef, monkeypatch: pytest.MonkeyPatch) -> None:
    event("simple" if same_problems_either_way(task, monkeypatch) else "checked in full")


@SETTINGS
@given(args=arg_dicts, env=env, cmd=st.sampled_from(TEXTS))
def test_the_shortcut_reports_what_the_full_checks_report_of_arguments_and_env(
        args: dict[str, Any], env: dict[str, Any], cmd: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    same_problems_either_way(TaskDef("f", {"call": "m:f", "args": args}), monkeypatch)
    same_problems_either_way(TaskDef("s", {"cmd": cmd, "env": env}), monkeypatch)


BOUNDARIES: dict[str, list[Any]] = {
    "name": NAMES, "queue": ["GPU", "a" * 37, "", *RESERVED_QUEUES, 5, False],
    "dep_policy": ["none", "", 0, 1, True, 1.0, None], "condition": ["true", 3],
    "num_retries": BOUNDARIES_RETRIES,
    "retry_backoff_s": SECONDS, "retry_backoff_max_s": SECONDS, "timeout_s": SECONDS,
    "delay_s": SECONDS, "merge": [True, 0, None], "kind": ["shell", "bogus", "merge", 3],
}


@pytest.mark.parametrize(("field", "value"), [
    pytest.param(f, v, id=f"{f}-{k}") for f, values in BOUNDARIES.items()
    for k, v in enumerate(values)])
def test_each_boundary_value_alone_gets_the_same_problems(
        field: str, value: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    task = TaskDef(**{"name": "t", "kwargs": {"cmd": "true"}, field: value})
    same_problems_either_way(task, monkeypatch)


def same_problems_either_way(task: TaskDef, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Assert the problems of a workflow holding ``task`` are the same with the shortcut
    and without; True when the task took it."""
    defn = workflow(task)
    with_shortcut = problems(defn, True, monkeypatch)
    assert with_shortcut == problems(defn, False, monkeypatch)
    return bool(simple_tasks(defn.tasks)[2])


@settings(max_examples=300, deadline=None)
@given(task=tasks(moved=0))
def test_tasks_made_of_plain_values_take_the_shortcut(task: TaskDef) -> None:
    assert list(simple_tasks([task])) == [1]


def test_plain_tasks_of_every_common_shape_take_the_shortcut() -> None:
    plain = [
        TaskDef("prep", {"cmd": "python prep.py --shard 3", "env": {"SHARD": "3"},
                         "cwd": "/data", "gpus": 1}, queue="gpu", num_retries=2,
                retry_backoff_s=5, timeout_s=3600.0),
        TaskDef("fit", {"call": "ml.train:fit", "args": {"lr": 0.1, "epochs": 3, "tag": "a",
                                                         "warm": None, "cuda": True}},
                depends_on=("prep",), dep_policy="any", delay_s=1.5),
        TaskDef("join", kind="noop", depends_on=("prep", "fit"), dep_policy=2),
    ]
    assert list(simple_tasks(plain)) == [1, 1, 1]
    assert validate_module.validate(WorkflowDef(name="w", tasks=tuple(plain))) == []


@pytest.mark.parametrize("task", [
    TaskDef("a", {"cmd": "echo {params.x}"}),
    TaskDef("a", {"cmd": "echo é"}),
    TaskDef("a", {"cmd": "true", "x-owner": "me"}),
    TaskDef("a", {"call": "m:f", "args": {"nested": {"k": 1}}}),
    TaskDef("a", {"cmd": "true"}, condition="true", depends_on=("b",)),
    TaskDef("a.", {"cmd": "true"}),
    TaskDef("a", {"cmd": "true"}, kind="shell"),
])
def test_anything_unusual_is_left_to_the_full_checks(task: TaskDef) -> None:
    assert list(simple_tasks([task])) == [0]


def test_a_custom_kind_marker_among_the_keys_is_not_simple(
        monkeypatch: pytest.MonkeyPatch) -> None:
    task = TaskDef("t", {"cmd": "true", "gpus": 1})
    with registered_kind(TaskKind("gpu-shell", "a test kind", marker="gpus", keys={"gpus": {}})):
        assert list(simple_tasks([task])) == [0]
        defn = workflow(task)
        found = problems(defn, True, monkeypatch)
        assert found and found == problems(defn, False, monkeypatch)
    assert list(simple_tasks([task])) == [1]


items = st.dictionaries(
    st.sampled_from(["name", "kwargs", "depends_on", "queue", "timeout_s", "kind", "merge",
                     "workflow", "params", "bogus"]),
    st.one_of(st.none(), st.sampled_from(["a", "", 3, True, 1.5]), st.lists(st.sampled_from(
        ["a", "b", 1]), max_size=2), st.just({"cmd": "true"})), max_size=5)


@SETTINGS
@given(item=items)
def test_the_parser_shortcut_builds_the_task_the_full_builder_builds(item: dict[str, Any]) -> None:
    quick = parse._plain_task(item)
    if quick is not None:
        problems: list[Problem] = []
        full = parse._build_task(item, "tasks[0]", 0, validate_module.SourceMap(), 0, problems)
        assert quick == full and not problems

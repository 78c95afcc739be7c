"""The Python builder: tasks, names, fields, function tasks and their errors."""

from __future__ import annotations

import functools
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dagq.backends import open_backend
from dagq.client import WorkflowClient
from dagq.compose import Chain, Group, Task, WithDelay, Workflow, task
from dagq.core.model import TaskDef, WorkflowDef
from dagq.errors import DefinitionError
from tests.compose import sample_tasks
from tests.compose.sample_tasks import Shouter, add, numbers, scale, total


def build(*steps: Any, **fields: Any) -> WorkflowDef:
    return Workflow("wf", *steps, **fields).build()


def by_name(defn: WorkflowDef) -> dict[str, TaskDef]:
    return {t.name: t for t in defn.tasks}


def error_of(fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(DefinitionError) as err:
        fn(*args, **kwargs)
    return str(err.value)


def test_shell_task_carries_every_yaml_field() -> None:
    t = task("train", cmd="python train.py", queue="gpu", num_retries=2, retry_backoff_s=5,
             retry_backoff_max_s=60, timeout_s=3600, delay_s=1.5, dep_policy="any",
             env={"EPOCHS": 3}, cwd="/data", bg_dirsync_to="ckpt")
    defn = build(Chain(task("prep", cmd="true"), t))
    got = by_name(defn)["train"]
    assert got.kwargs == {"cmd": "python train.py", "env": {"EPOCHS": 3}, "cwd": "/data",
                          "bg_dirsync_to": "ckpt"}
    assert (got.queue, got.num_retries, got.retry_backoff_s, got.retry_backoff_max_s,
            got.timeout_s, got.delay_s, got.dep_policy, got.depends_on) == (
        "gpu", 2, 5, 60, 3600, 1.5, "any", ("prep",))


def test_workflow_fields_reach_the_definition() -> None:
    defn = build(task("a", cmd="true"), default_queue="cpu", default_task_timeout_s=60,
                 max_parallelism=4, result_policy="all_tasks_succeed", params={"k": 1},
                 description="demo")
    assert (defn.name, defn.default_queue, defn.default_task_timeout_s, defn.max_parallelism,
            defn.result_policy, dict(defn.params), defn.description) == (
        "wf", "cpu", 60, 4, "all_tasks_succeed", {"k": 1}, "demo")


def test_function_task_records_import_path_and_json_args() -> None:
    t = task(add, a=1, b=(2, 3))
    assert t.kwargs == {"call": "tests.compose.sample_tasks:add", "args": {"a": 1, "b": [2, 3]}}
    assert task(sample_tasks.nothing).kwargs == {"call": "tests.compose.sample_tasks:nothing"}
    static = task(Shouter.shout, text="hi", name="s")
    assert static.kwargs["call"] == "tests.compose.sample_tasks:Shouter.shout"
    assert task(Shouter.name).kwargs["call"] == "tests.compose.sample_tasks:Shouter.name"


def test_args_mapping_allows_names_that_clash_with_builder_keywords() -> None:
    t = task(add, args={"a": 1}, b=2, name="sum", env={"X": "1"})
    assert t.kwargs == {"call": "tests.compose.sample_tasks:add", "args": {"a": 1, "b": 2},
                        "env": {"X": "1"}}
    assert "given both in args= and as keywords" in error_of(task, add, args={"a": 1}, a=2)


def test_call_string_task_needs_no_import() -> None:
    t = task("remote", call="somepkg.jobs:train", args={"epochs": 5})
    assert t.kwargs == {"call": "somepkg.jobs:train", "args": {"epochs": 5}}
    assert "call= must look like 'package.module:function'" in error_of(
        task, "x", call="not a path")


def test_automatic_names_are_unique_and_skip_explicit_ones() -> None:
    defn = build(Chain(task(numbers, n=2), Group(task(scale, factor=2),
                                                 task(scale, factor=3, name="scale_1"),
                                                 task(scale, factor=4)),
                       task(total), task(cmd="true"), task(cmd="true")))
    assert [t.name for t in defn.tasks] == ["numbers", "scale_2", "scale_1", "scale_3", "total",
                                            "task_1", "task_2"]


def test_explicit_extra_dependencies_add_to_the_composition() -> None:
    defn = build(task("a", cmd="true"),
                 Chain(task("b", cmd="true"), task("c", cmd="true", depends_on=["a", "b"])))
    assert by_name(defn)["c"].depends_on == ("b", "a")


def test_duplicate_names_are_rejected() -> None:
    msg = error_of(build, Group(task("x", cmd="true"), Chain(task("y", cmd="true"),
                                                            task("x", cmd="false"))))
    assert "two tasks are named 'x'" in msg


def test_the_same_task_object_twice_is_rejected() -> None:
    t = task(cmd="true")
    assert "used twice" in error_of(build, Chain(t, t))


def test_lambdas_nested_and_main_functions_are_rejected_with_the_reason() -> None:
    assert "a lambda" in error_of(task, lambda: 1)

    def local() -> None:
        pass

    assert "inside another function" in error_of(task, local)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec("def train():\n    pass\n", namespace)
    msg = error_of(task, namespace["train"])
    assert "__main__" in msg and "import" in msg
    assert "bound to an object" in error_of(task, sample_tasks.ShoutProcessor().run)
    assert "no import path" in error_of(task, functools.partial(add, 1))


def test_arguments_must_be_json_and_match_the_signature() -> None:
    msg = error_of(task, add, a=object())
    assert "argument 'a' is not JSON-serialisable" in msg
    assert "missing a required argument: 'a'" in error_of(task, add)
    assert "unexpected keyword argument 'c'" in error_of(task, add, a=1, c=2)
    # a parameter named inputs is filled by the worker, so it need not be given
    assert task(scale, factor=2).kwargs["args"] == {"factor": 2}


def test_builder_misuse_gives_clear_errors() -> None:
    assert "at least one step" in error_of(Chain)
    assert "at least one step" in error_of(Group)
    assert "must not be negative" in error_of(WithDelay, task(cmd="true"), delay_s=-1)
    assert "name twice" in error_of(task, "a", name="b", cmd="true")
    assert "not both" in error_of(task, add, cmd="echo")
    assert "args= is for function tasks" in error_of(task, "a", cmd="true", args={"x": 1})
    with pytest.raises(TypeError, match="Chain\\(\\) takes tasks"):
        Chain("echo hi")  # type: ignore[arg-type]


def test_invalid_definitions_list_every_problem() -> None:
    msg = error_of(build, Chain(task("a", cmd="true", queue="GPU Queue"),
                                task("b", cmd="true", condition="inputs.zzz > 1")))
    assert "queue name 'GPU Queue' is not allowed" in msg
    assert "zzz" in msg


def test_plain_functions_are_accepted_as_steps() -> None:
    defn = build(Chain(sample_tasks.nothing, sample_tasks.whoami))
    assert [(t.name, t.depends_on) for t in defn.tasks] == [("nothing", ()),
                                                           ("whoami", ("nothing",))]
    assert isinstance(Chain(sample_tasks.nothing).steps[0], Task)


def test_submit_stores_the_workflow_and_returns_its_id(tmp_path: Path) -> None:
    backend = open_backend(f"sqlite:{tmp_path / 'x.db'}")
    try:
        client = WorkflowClient(backend)
        wf = Workflow("submitted", Chain(task(numbers, n=3), task(total)))
        wf_id = wf.submit(client, workflow_id="wf-1")
        assert wf_id == "wf-1"
        assert client.state(wf_id).definition == wf.build()
        assert wf.submit(client, workflow_id="wf-1") == "wf-1"  # idempotent
    finally:
        backend.close()


def test_sub_workflow_tasks_take_workflows_definitions_and_factory_steps() -> None:
    from dagq.compose import Workflow, task
    from dagq.core.model import SubWorkflow
    from dagq.errors import DefinitionError

    child = Workflow("child", task("one", cmd="true"))
    wf = Workflow("parent", task("inline", workflow=child, params={"k": 1}),
                  task("made", workflow=SubWorkflow(factory="pkg.mod:fn", params={"a": 1}),
                       params={"b": 2}))
    defn = wf.build()
    inline, made = defn.task("inline").workflow, defn.task("made").workflow
    assert inline is not None and inline.definition == child.build()
    assert dict(inline.params) == {"k": 1}
    assert made is not None and made.factory == "pkg.mod:fn"
    assert dict(made.params) == {"a": 1, "b": 2}
    with pytest.raises(DefinitionError, match="remove cmd="):
        task("bad", workflow=child, cmd="true")
    with pytest.raises(DefinitionError, match="workflow= takes"):
        task("bad", workflow="child.yaml")  # type: ignore[arg-type]


def test_the_dramatiq_workflow_delay_spelling_is_refused_with_its_unit() -> None:
    # dramatiq-workflow's README: WithDelay(task, delay=1_000) means one second
    msg = error_of(WithDelay, task(cmd="true"), delay=1_000)
    assert "a bare number has no unit here" in msg and "delay_ms=1000" in msg
    assert "exactly one of" in error_of(WithDelay, task(cmd="true"))
    assert "exactly one of" in error_of(WithDelay, task(cmd="true"), delay_s=1, delay_ms=1)
    wf = Workflow("d", Chain(task("a", cmd="true"),
                             WithDelay(task("b", cmd="true"), delay_ms=1_000),
                             WithDelay(task("c", cmd="true"), delay=timedelta(minutes=2))))
    assert [t.delay_s for t in wf.build().tasks] == [0.0, 1.0, 120.0]


def test_absurd_delays_fail_the_build() -> None:
    wf = Workflow("d", WithDelay(task("b", cmd="true"), delay_s=1e20))
    assert "more than the limit of 604800" in error_of(wf.build)


def test_a_workflow_without_a_name_says_so() -> None:
    msg = error_of(Workflow, Chain(task("a", cmd="true")))
    assert "takes the workflow's name first, got Chain" in msg


def test_a_task_that_runs_nothing_fails_the_build_unless_it_is_a_join() -> None:
    assert "this task runs nothing" in error_of(Workflow("w", task("a")).build)
    assert "did you mean 'cmd'" in error_of(Workflow("w", task("a", command="x")).build)
    defn = Workflow("w", Chain(task("a", cmd="true"), task("j", kind="noop"))).build()
    assert defn.task("j").kind == "noop"

"""Task kinds and their keys, glob characters in names, duration bounds: the authoring
traps, met the way a user meets them (a YAML file through the parser)."""

from __future__ import annotations

import textwrap

import pytest

from dagq.core.kinds import TaskKind, register_kind, registered_kind
from dagq.core.parse import load_definition
from dagq.errors import DefinitionError, Problem


def problems_of(text: str) -> list[Problem]:
    with pytest.raises(DefinitionError) as info:
        load_definition(textwrap.dedent(text))
    return info.value.problems


def one(text: str) -> Problem:
    problems = problems_of(text)
    assert len(problems) == 1, problems
    return problems[0]


def test_a_task_with_nothing_to_run_is_an_error() -> None:
    p = one("""\
        name: x
        tasks:
          - name: forgot-the-command
        """)
    assert p.task == "forgot-the-command" and p.line == 3
    assert "this task runs nothing" in p.message and "kind: noop" in p.message


def test_a_typo_in_the_marker_key_is_caught_with_a_suggestion() -> None:
    p = one("""\
        name: x
        tasks:
          - name: a
            kwargs: {command: python train.py}
        """)
    assert p.field == "tasks[0].kwargs"
    assert p.message.startswith("kwargs.command: did you mean 'cmd'?; this task runs nothing")


def test_unknown_keys_of_a_known_kind_are_errors_with_did_you_mean() -> None:
    problems = problems_of("""\
        name: x
        tasks:
          - name: a
            kwargs: {cmd: run, cwdir: /tmp, enviroment: {A: 1}, x_owner: me}
          - name: b
            kwargs: {call: "pkg.mod:fn", argz: {n: 1}}
        """)
    assert [(p.task, p.field) for p in problems] == [
        ("a", "tasks[0].kwargs.cwdir"), ("a", "tasks[0].kwargs.enviroment"),
        ("b", "tasks[1].kwargs.argz")]
    assert "did you mean 'cwd'?" in problems[0].message
    assert "shell tasks take cmd, env, cwd, bg_dirsync_to" in problems[0].message
    assert "did you mean 'args'?" in problems[2].message


def test_an_explicit_noop_join_is_fine_and_must_stay_empty() -> None:
    defn = load_definition("name: x\ntasks:\n- {name: a, kwargs: {cmd: run}}\n"
                           "- {name: join, kind: noop, depends_on: [a]}\n")
    assert defn.task("join").kind == "noop"
    p = one("name: x\ntasks:\n- {name: j, kind: noop, kwargs: {cmd: run}}\n")
    assert "kind is 'noop' but the task is a shell command" in p.message
    p = one("name: x\ntasks:\n- {name: j, kind: noop, kwargs: {cwd: /}}\n")
    assert p.message == ("a noop task runs nothing, so kwargs.cwd would never be used; "
                         "remove it")


def test_explicit_kinds_must_agree_and_be_known() -> None:
    assert one("name: x\ntasks:\n- {name: a, kind: shel, kwargs: {cmd: x}}\n").message == (
        "unknown kind a string ('shel'); use one of shell, function, workflow, noop; "
        "did you mean 'shell'?")
    assert one("name: x\ntasks:\n- {name: a, kind: shell}\n").message == (
        "a shell task needs kwargs.cmd")
    assert "needs the 'workflow' field" in one(
        "name: x\ntasks:\n- {name: a, kind: workflow}\n").message
    assert load_definition("name: x\ntasks:\n- {name: a, kind: function, "
                           "kwargs: {call: 'm:f'}}\n").tasks[0].kind == "function"


def test_keys_of_a_workflow_task_would_never_be_used() -> None:
    p = one("name: x\ntasks:\n- {name: a, workflow: c.yaml, kwargs: {env: {A: 1}}}\n")
    assert p.field == "tasks[0].kwargs.env"
    assert "runs the child workflow" in p.message


def test_custom_processors_declare_their_kind() -> None:
    spark = TaskKind("spark", "a Spark job", marker="jar",
                     keys={"jar": {"type": "string"}, "executors": {"type": "integer"}})
    text = "name: x\ntasks:\n- {name: a, kwargs: {jar: job.jar, executor: 4}}\n"
    assert "runs nothing" in one(text).message  # not registered: unknown
    with registered_kind(spark):
        p = one(text)
        assert "unknown key kwargs.executor for a spark task; did you mean 'executors'?" \
            in p.message
        assert load_definition(text.replace("executor:", "executors:")).tasks[0].kwargs == {
            "jar": "job.jar", "executors": 4}
        register_kind(spark)  # the same declaration twice is fine
        with pytest.raises(ValueError, match="clashes"):
            register_kind(TaskKind("spark", "other", marker="py"))
    reference = TaskKind("ml", "keys for a processor that reads kwargs as data",
                         keys={"model": {"type": "string"}})
    with registered_kind(reference):  # no marker: chosen with kind: ml
        assert load_definition("name: x\ntasks:\n- {name: a, kind: ml, kwargs: {model: m}}\n")
        assert "unknown key kwargs.modle" in one(
            "name: x\ntasks:\n- {name: a, kind: ml, kwargs: {modle: m}}\n").message


@pytest.mark.parametrize("name", ["a*b", "train[0]", "x]"])
def test_glob_characters_in_task_names_are_refused(name: str) -> None:
    p = one(f"name: x\ntasks:\n- {{name: '{name}', kind: noop}}\n")
    assert p.field == "tasks[0].name"
    assert "no condition could refer to this task" in p.message


@pytest.mark.parametrize(("field", "value"), [
    ("delay_s", "1.0e+20"), ("delay_s", 8 * 86400), ("retry_backoff_s", 1e9),
    ("retry_backoff_max_s", 1e12), ("timeout_s", "1.0e+20")])
def test_absurd_durations_are_validation_errors(field: str, value: object) -> None:
    p = one(f"name: x\ntasks:\n- {{name: a, kind: noop, {field}: {value}}}\n")
    assert p.field == f"tasks[0].{field}"
    assert "durations are in seconds" in p.message


def test_a_week_of_delay_is_still_fine() -> None:
    defn = load_definition("name: x\ntasks:\n- {name: a, kind: noop, delay_s: 604800}\n")
    assert defn.tasks[0].delay_s == 604800

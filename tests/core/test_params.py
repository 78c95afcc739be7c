"""Run parameters: declarations, values checked at submit, and {params.K} in kwargs."""

from __future__ import annotations

import shlex
import subprocess
import textwrap

import pytest

from dagq.core.params import apply_params, parse_cli_value, render_kwargs
from dagq.core.parse import load_definition
from dagq.errors import DefinitionError, Problem

DECLARED = textwrap.dedent("""\
    name: train
    parameters:
      epochs: {type: integer, default: 5}
      dataset: {type: string, description: input table}
      lr: {type: number, required: false}
    tasks:
      - name: fit
        kwargs:
          cmd: python train.py --epochs {params.epochs} --data {params.dataset}
          env: {DATASET: "{params.dataset}"}
    """)


def problems(text: str) -> list[Problem]:
    with pytest.raises(DefinitionError) as info:
        load_definition(text)
    return info.value.problems


def test_declared_defaults_fill_in_and_required_ones_must_be_given() -> None:
    defn = load_definition(DECLARED)
    assert defn.parameters["epochs"] == {"type": "integer", "default": 5}
    with pytest.raises(DefinitionError, match="missing required parameter 'dataset'"):
        apply_params(defn, {})
    run = apply_params(defn, {"dataset": "sales"})
    assert run.params == {"epochs": 5, "dataset": "sales"}
    assert apply_params(run, {"dataset": "sales"}) == run  # idempotent


def test_unknown_and_ill_typed_parameters_are_named() -> None:
    defn = load_definition(DECLARED)
    with pytest.raises(DefinitionError) as info:
        apply_params(defn, {"dataset": "s", "epoch": 3, "lr": "fast"})
    messages = [p.message for p in info.value.problems]
    assert "unknown parameter 'epoch'; did you mean 'epochs'?" in messages[0]
    assert messages[1] == "parameter 'lr' must be of type number, got a string ('fast')"
    assert {p.field for p in info.value.problems} == {"params.epoch", "params.lr"}


def test_bad_declarations_and_references_are_validation_errors() -> None:
    found = problems(textwrap.dedent("""\
        name: x
        parameters:
          n: {type: int, default: 1}
          m: {type: integer, default: "1", requird: true}
        params: {n: 2, zz: 1}
        tasks:
          - {name: a, kwargs: {cmd: "echo {params.nn} {{params.literal}}"}}
        """))
    assert [(p.field, p.line) for p in found] == [
        ("parameters.n.type", 3), ("parameters.m.default", 4), ("parameters.m.requird", 4),
        ("params.zz", 5), ("tasks[0].kwargs.cmd", 7)]
    assert "did you mean 'integer'?" in found[0].message
    assert "{params.nn} names no parameter; did you mean 'n'?" in found[4].message


def test_values_are_shell_quoted_in_cmd_and_plain_elsewhere() -> None:
    kwargs = {"cmd": "echo {params.v} {{params.v}}", "env": {"V": "x={params.v}"},
              "args": {"n": "{params.n}", "s": "n={params.n}", "l": ["{params.v}"]}}
    out = render_kwargs(kwargs, {"v": "a b; touch pwned", "n": 3})
    assert out["cmd"] == "echo 'a b; touch pwned' {params.v}"
    assert out["env"] == {"V": "x=a b; touch pwned"}
    assert out["args"] == {"n": 3, "s": "n=3", "l": ["a b; touch pwned"]}


@pytest.mark.parametrize("value", ["; touch pwned", "$(touch pwned)", "`touch pwned`",
                                   "' ; touch pwned; '", "a\nb", "-n", ""])
def test_no_value_can_add_a_command(value: str, tmp_path: object) -> None:
    cmd = render_kwargs({"cmd": "printf %s {params.v}"}, {"v": value})["cmd"]
    out = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True,
                         cwd=str(tmp_path), timeout=10)
    assert out.stdout == value
    assert not (tmp_path / "pwned").exists()  # type: ignore[operator]
    assert shlex.split(cmd)[-1] == value


def test_cli_values_follow_the_declared_type() -> None:
    defn = load_definition(DECLARED)
    assert parse_cli_value(defn, "epochs", "7") == 7
    assert parse_cli_value(defn, "dataset", "007") == "007"
    assert parse_cli_value(defn, "lr", "1e-3") == 0.001
    with pytest.raises(DefinitionError, match="parameter 'epochs' is of type integer"):
        parse_cli_value(defn, "epochs", "many")
    bare = load_definition("name: x\ntasks: [{name: a, kind: noop}]\n")
    assert parse_cli_value(bare, "k", "5") == 5
    assert parse_cli_value(bare, "k", "[1, 2]") == [1, 2]
    assert parse_cli_value(bare, "k", "hello") == "hello"
    assert parse_cli_value(bare, "k", "null") == "null"


def test_placeholders_no_quoting_makes_safe_are_validation_errors() -> None:
    found = problems(textwrap.dedent("""\
        name: x
        parameters:
          label: {type: string}
        tasks:
          - name: ok
            kwargs: {cmd: "printf '%s' '{params.label}' \\"{params.label}\\""}
          - name: report
            kwargs:
              cmd: |
                echo start
                echo `date -d {params.label}`
                echo "$(cat <<EOF
                {params.label}
                EOF
                )"
        """))
    assert [(p.task, p.field, p.line) for p in found] == [
        ("report", "tasks[1].kwargs.cmd", 9), ("report", "tasks[1].kwargs.cmd", 9)]
    assert found[0].message.startswith("{params.label} on line 2 of cmd stands inside "
                                       "backquotes")
    assert found[1].message.startswith("{params.label} on line 4 of cmd comes after a "
                                       "here-document (<<)")
    assert 'env: {P: "{params.label}"} and "$P" in cmd' in found[0].message


def test_a_refused_cmd_stored_before_the_check_fails_at_dispatch_not_in_the_shell() -> None:
    with pytest.raises(ValueError, match=r"kwargs.cmd: \{params.v\} stands inside backquotes"):
        render_kwargs({"cmd": "echo `echo {params.v}`"}, {"v": "$(touch pwned)"})
    with pytest.raises(ValueError, match=r"kwargs\.env\.V: a parameter value"):
        render_kwargs({"cmd": "true", "env": {"V": "{params.v}"}}, {"v": "a\x00b"})


def test_cwd_gets_the_plain_value() -> None:
    out = render_kwargs({"cmd": "pwd", "cwd": "/data/{params.day}"}, {"day": "2024-01-02"})
    assert out["cwd"] == "/data/2024-01-02"


@pytest.mark.parametrize("value", ["a\x00b", ["ok", "a\x00"], {"k": {"deep": "\x00"}},
                                   {"k\x00": 1}])
def test_values_with_a_nul_byte_are_refused_at_submit(value: object) -> None:
    defn = load_definition("name: x\nparameters: {p: {type: " + (
        "string" if isinstance(value, str) else "array" if isinstance(value, list)
        else "object") + "}}\ntasks: [{name: a, kwargs: {cmd: 'printf %s {params.p}'}}]\n")
    with pytest.raises(DefinitionError) as info:
        apply_params(defn, {"p": value})
    [problem] = info.value.problems
    assert problem.field == "params.p"
    assert problem.message.startswith("parameter 'p' contains a NUL byte")
    undeclared = load_definition("name: x\ntasks: [{name: a, kind: noop}]\n")
    with pytest.raises(DefinitionError, match="parameter 'q' contains a NUL byte"):
        apply_params(undeclared, {"q": value})


def test_a_nul_byte_in_the_definitions_own_params_is_a_validation_error() -> None:
    found = problems('name: x\nparams: {p: "a\\0b"}\ntasks: [{name: a, kind: noop}]\n')
    assert [(p.field, p.line) for p in found] == [("params.p", 2)]
    assert "contains a NUL byte" in found[0].message

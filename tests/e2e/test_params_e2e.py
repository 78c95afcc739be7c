"""Run parameters end to end: ``dagq run --param`` reaches cmd (shell-quoted), env and
function args, and a hostile value runs nothing extra."""

from __future__ import annotations

import textwrap

import pytest

from tests.e2e.harness import REPO, Dagq

pytestmark = pytest.mark.slow

DEFINITION = textwrap.dedent("""\
    name: params
    parameters:
      label: {type: string}
      epochs: {type: integer, default: 2}
    tasks:
      - name: shell
        kwargs:
          cmd: >-
            printf '{"label": "%s", "env": "%s", "epochs": %s}' {params.label}
            "$LABEL" {params.epochs} > "$DAGQ_OUTPUT_FILE"
          env: {LABEL: "{params.label}"}
      - name: fn
        kwargs:
          call: tests.compose.sample_tasks:add
          args: {a: "{params.epochs}", b: 40}
    """)


def test_a_hostile_value_is_one_shell_word(dagq: Dagq) -> None:
    path = dagq.write("params.yaml", DEFINITION)
    hostile = "x; touch pwned; $(touch pwned2) `touch pwned3`"
    res = dagq.run("run", str(path), "--id", "p1", "--param", f"label={hostile}", cwd=dagq.root,
                   env={"PYTHONPATH": str(REPO)})
    assert res.returncode == 0, res.stderr
    assert dagq.output("p1", "shell") == {"label": hostile, "env": hostile, "epochs": 2}
    assert dagq.output("p1", "fn") == 42
    assert not [p.name for p in dagq.root.rglob("pwned*")]


def test_missing_unknown_and_ill_typed_parameters_write_nothing(dagq: Dagq) -> None:
    path = dagq.write("params.yaml", DEFINITION)
    for args, message, code in [
        ((), "missing required parameter 'label'", 1),
        (("--param", "label=a", "--param", "epoch=3"), "unknown parameter 'epoch'", 1),
        (("--param", "label=a", "--param", "epochs=many"), "is of type integer", 1),
        (("--param", "label"), "must look like KEY=VALUE", 2),  # a usage error
    ]:
        res = dagq.run("submit", str(path), *args)
        assert res.returncode == code, (args, res)
        assert message in res.stderr, res.stderr
    assert dagq.run("list", "--json").stdout.strip() == "[]"

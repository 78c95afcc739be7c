"""``--param`` on the command line: a value with a NUL byte and a command that puts a
value where no quoting is safe are bad data (exit 1), a key given twice is a usage error
(exit 2); none of them writes anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DAGQ = str(Path(sys.executable).parent / "dagq")
FLOW = """\
name: p
parameters:
  label: {type: string, default: x}
  tags: {type: array, default: []}
tasks:
  - {name: a, kwargs: {cmd: "printf %s {params.label}"}}
"""


def dagq(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}")
    return subprocess.run([DAGQ, *args], env=env, capture_output=True, text=True,
                          cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=60, check=False)


@pytest.mark.parametrize(("flow", "args", "code", "message"), [
    (FLOW, ["--param", 'tags=["ok", "a\\u0000b"]'], 1,
     "parameter 'tags' contains a NUL byte (at [1])"),
    ("name: q\nparams: {v: x}\ntasks: [{name: a, kwargs: {cmd: 'printf %s {params.v}'}}]\n",
     ["--param", 'v={"k": "a\\u0000"}'], 1, "parameter 'v' contains a NUL byte (at k)"),
    (FLOW, ["--param", "label=a", "--param", "label=b"], 2, "--param label is given more than"),
    (FLOW.replace("printf %s {params.label}", "echo `echo {params.label}`"), [], 1,
     "{params.label} stands inside backquotes"),
])
def test_bad_parameters_are_refused_before_anything_is_written(
        tmp_path: Path, flow: str, args: list[str], code: int, message: str) -> None:
    (tmp_path / "flow.yaml").write_text(flow)
    out = dagq(tmp_path, "submit", "flow.yaml", *args)
    assert out.returncode == code, out
    assert message in out.stderr, out.stderr
    assert json.loads(dagq(tmp_path, "list", "--json").stdout) == []

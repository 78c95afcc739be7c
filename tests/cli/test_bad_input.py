"""Bad command-line input gets a message and writes nothing: usage errors exit 2, bad
data exits 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DAGQ = str(Path(sys.executable).parent / "dagq")


@pytest.mark.parametrize("args", [
    ["list", "--status", "bogus"],
    ["submit", "a.yaml", "b.yaml", "--id", "x"],
    ["submit", "a.yaml", "--max-fan-in", "1"],
    ["status"],
    ["no-such-command"],
    ["list", "--since", "yesterday"],
    ["submit", "a.yaml", "b.yaml", "--watch"],
    ["wait"],
])
def test_usage_errors_exit_2(tmp_path: Path, args: list[str]) -> None:
    env = dict(os.environ, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}")
    out = subprocess.run([DAGQ, *args], env=env, capture_output=True, text=True,
                         cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=60)
    assert out.returncode == 2, out
    assert "Error" in out.stderr or "error" in out.stderr


def test_a_file_the_fan_in_transform_refuses_stops_the_whole_submission(tmp_path: Path) -> None:
    env = dict(os.environ, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}")
    (tmp_path / "good.yaml").write_text(
        "name: good\ntasks:\n  - {name: a, kwargs: {cmd: 'true'}}\n")
    (tmp_path / "fan.yaml").write_text(
        "name: fan\ntasks:\n  - {name: a, kwargs: {cmd: 'true'}}\n"
        "  - {name: b, kwargs: {cmd: 'true'}}\n  - {name: c, kwargs: {cmd: 'true'}}\n"
        "  - name: join\n    depends_on: [a, b, c]\n    condition: inputs.a.ok == true\n"
        "    kwargs: {cmd: 'true'}\n")
    out = subprocess.run([DAGQ, "submit", "good.yaml", "fan.yaml", "--max-fan-in", "2"],
                         env=env, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 1
    assert "join" in out.stderr and out.stdout == ""
    listed = subprocess.run([DAGQ, "list", "--json"], env=env, capture_output=True, text=True,
                            timeout=60)
    assert json.loads(listed.stdout) == []  # nothing was submitted

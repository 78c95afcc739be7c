"""``dagq schema`` and custom task kinds named by ``DAGQ_TASK_KINDS``, as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dagq.core.schema import load_schema

DAGQ = str(Path(sys.executable).parent / "dagq")
KINDS = '''\
from dagq.core.kinds import TaskKind
SPARK = TaskKind("spark", "a Spark job", marker="jar",
                 keys={"jar": {"type": "string", "description": "The job's jar."}})
'''


def dagq(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}", **env)
    return subprocess.run([DAGQ, *args], env=full, capture_output=True, text=True,
                          cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=60)


def test_schema_prints_the_shipped_schema_and_writes_a_file(tmp_path: Path) -> None:
    out = dagq(tmp_path, "schema")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == load_schema()
    assert dagq(tmp_path, "schema", "--write", "s.json").returncode == 0
    assert json.loads((tmp_path / "s.json").read_text())["$id"] == load_schema()["$id"]


def test_custom_kinds_validate_and_appear_in_the_schema(tmp_path: Path) -> None:
    (tmp_path / "mykinds.py").write_text(KINDS)
    (tmp_path / "job.yaml").write_text(
        "name: j\ntasks:\n- {name: a, kwargs: {jar: x.jar}}\n")
    refused = dagq(tmp_path, "validate", "job.yaml")
    assert refused.returncode == 1 and "this task runs nothing" in refused.stderr
    ok = dagq(tmp_path, "validate", "job.yaml", DAGQ_TASK_KINDS="mykinds:SPARK")
    assert ok.returncode == 0, ok.stderr
    out = dagq(tmp_path, "schema", "--kinds", "mykinds:SPARK")
    assert "spark" in json.loads(out.stdout)["$defs"]["kinds"]
    bad = dagq(tmp_path, "validate", "job.yaml", DAGQ_TASK_KINDS="nomodule:X")
    assert bad.returncode == 1
    assert "DAGQ_TASK_KINDS 'nomodule:X' cannot be imported" in bad.stderr


def test_dagq_run_learns_the_kind_of_its_processors(tmp_path: Path) -> None:
    root = str(Path(__file__).resolve().parents[2])
    (tmp_path / "s.yaml").write_text("name: s\ntasks:\n- {name: a, kwargs: {shout: hi}}\n")
    out = dagq(tmp_path, "run", "s.yaml", "--id", "s1", "--processor",
               "tests.compose.sample_tasks:ShoutProcessor", PYTHONPATH=root)
    assert out.returncode == 0, out.stderr
    assert json.loads(dagq(tmp_path, "output", "s1", "a").stdout)["text"] == "HI"

"""`dagq status` and `dagq tasks` on a workflow with many tasks: a page, not a flood."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dagq.backends import open_backend
from dagq.client import WorkflowClient
from dagq.core.model import TaskDef, WorkflowDef

DAGQ = str(Path(sys.executable).parent / "dagq")


def run(env: dict[str, str], *args: str) -> str:
    out = subprocess.run([DAGQ, *args], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_status_shows_a_bounded_page_and_says_how_to_see_the_rest(tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'x.db'}"
    tasks = tuple(TaskDef(f"t{i:03d}", {"cmd": "true"}) for i in range(300))
    WorkflowClient(open_backend(store)).submit(WorkflowDef("wide", tasks), workflow_id="w")
    env = dict(os.environ, DAGQ_STORE=store, COLUMNS="300")
    page = run(env, "status", "w", "--limit", "5")
    rows = [line for line in page.splitlines() if line.startswith("t")]
    assert len(rows) == 5
    assert "... and 295 more tasks" in page and "dagq tasks --workflow w" in page
    assert len([ln for ln in run(env, "status", "w", "--limit", "0").splitlines()
                if ln.startswith("t")]) == 300
    names = [t["name"] for t in json.loads(run(env, "tasks", "--workflow", "w", "--offset",
                                               "10", "--limit", "3", "--json"))]
    assert names == ["t010", "t011", "t012"]

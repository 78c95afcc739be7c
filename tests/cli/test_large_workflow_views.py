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
    return run_both(env, *args)[0]


def run_both(env: dict[str, str], *args: str) -> tuple[str, str]:
    out = subprocess.run([DAGQ, *args], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout, out.stderr


def test_status_shows_a_bounded_page_and_says_how_to_see_the_rest(tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'x.db'}"
    tasks = tuple(TaskDef(f"t{i:03d}", {"cmd": "true"}) for i in range(300))
    WorkflowClient(open_backend(store)).submit(WorkflowDef("wide", tasks), workflow_id="w")
    env = dict(os.environ, DAGQ_STORE=store, COLUMNS="300")
    page, note = run_both(env, "status", "w", "--limit", "5")  # piped: task lines on stdout
    rows = [line for line in page.splitlines() if line.startswith("task\t")]
    assert len(rows) == 5
    assert "... and 295 more tasks" in note and "dagq tasks w" in note
    assert len([ln for ln in run(env, "status", "w", "--limit", "0").splitlines()
                if ln.startswith("task\t")]) == 300
    names = [t["name"] for t in json.loads(run(env, "tasks", "w", "--offset",
                                               "10", "--limit", "3", "--json"))]
    assert names == ["t010", "t011", "t012"]


def test_a_page_builds_only_its_rows_and_counts_every_task(tmp_path: Path) -> None:
    from dagq.core import engine
    from dagq.core.engine.state import WorkflowState

    backend = open_backend(f"sqlite:{tmp_path / 'x.db'}")
    client = WorkflowClient(backend)
    tasks = (TaskDef("root", {"cmd": "true"}),
             *(TaskDef(f"t{i}", {"cmd": "true"}, ("root",)) for i in range(2000)))
    wf = client.submit(WorkflowDef("wide", tasks)).id
    built: list[str] = []
    view = WorkflowState.task_view

    def counting(self: WorkflowState, name: str) -> engine.TaskView:
        built.append(name)
        return view(self, name)

    WorkflowState.task_view = counting  # type: ignore[method-assign]
    try:
        page = client.task_page(wf, offset=100, limit=7)
    finally:
        WorkflowState.task_view = view  # type: ignore[method-assign]
    assert [r["name"] for r in page.rows] == [f"t{i}" for i in range(99, 106)]
    assert built == [r["name"] for r in page.rows]  # no row for the other 1,994 tasks
    assert page.total == 2001 and page.counts == {"pending": 2001}
    assert client.task_page(wf, status="pending", prefix="t19", limit=3).total == 111

"""A task waiting out its delay shows when it is due (`dagq status`, `dagq tasks`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from dagq.backends import open_backend
from dagq.client import WorkflowClient
from dagq.compose import Chain, WithDelay, Workflow, task
from dagq.config import Settings
from dagq.runtime.coordinator import Coordinator

DAGQ = str(Path(sys.executable).parent / "dagq")


def test_a_delayed_task_shows_its_due_time(tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'x.db'}"
    backend = open_backend(store)
    wf = Workflow("later", Chain(WithDelay(task("wait", cmd="true"), delay_s=600)))
    wf_id = WorkflowClient(backend).submit(wf.build(), workflow_id="later-1").id
    coord = Coordinator(backend, Settings(store=store), children=WorkflowClient(backend))
    while coord.step():
        pass
    [row] = WorkflowClient(backend).tasks(wf_id)
    assert row["status"] == "running"
    assert row["due_at"] is not None and 599 < row["due_at"] - row["dispatched_at"] <= 600
    backend.close()
    env = dict(os.environ, DAGQ_STORE=store, COLUMNS="200")
    for args in (["status", wf_id], ["tasks", wf_id]):
        out = subprocess.run([DAGQ, *args], env=env, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        assert "delayed: due at" in out.stdout, out.stdout
    out = subprocess.run([DAGQ, "tasks", wf_id, "--json"], env=env,
                         capture_output=True, text=True, timeout=60)
    due = json.loads(out.stdout)[0]["due_at"]  # ISO-8601 UTC, to the millisecond
    assert abs(datetime.fromisoformat(due).timestamp() - row["due_at"]) < 0.001

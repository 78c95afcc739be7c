"""One phase vocabulary (issue 31, point 6): a task whose attempt is queued or waiting
has not started, so the views show no start time and no growing run time for it, but
how long it has been queued (or when it is due)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from dagq.backends import open_backend
from dagq.cli.follow import frame
from dagq.cli.render import started_at, took_text
from dagq.client import WorkflowClient
from tests.cli.kit import dagq, define, store_env, submit_dispatched

FLOW = """\
name: parked
tasks:
  - name: parked
    queue: nobody
    kwargs: {cmd: "true"}
  - name: later
    queue: nobody
    delay_s: 600
    kwargs: {cmd: "true"}
"""


@pytest.fixture
def parked(tmp_path: Path) -> dict[str, str]:
    env = store_env(tmp_path)
    submit_dispatched(env, define(tmp_path, "p.yaml", FLOW), "parked-1")
    return env


def test_status_tasks_and_watch_show_queued_for_instead_of_a_run_time(
        parked: dict[str, str]) -> None:
    status = dagq(parked, "status", "parked-1")  # piped: tab-separated task lines
    assert status.returncode == 0, status.stderr
    lines = {f[1]: f for f in (ln.split("\t") for ln in status.stdout.splitlines())
             if f[0] == "task"}
    assert lines["parked"][2] == "queued" and lines["parked"][5] == ""  # no start time
    assert lines["later"][2] == "waiting" and lines["later"][5] == ""
    tasks = dagq(parked, "tasks", "parked-1")
    rows = {f[0]: f for f in (ln.split("\t") for ln in tasks.stdout.splitlines())}
    assert rows["parked"][4] == "" and re.fullmatch(r"queued for \d+\.\ds", rows["parked"][5])
    assert rows["later"][4] == "" and rows["later"][5].startswith("due in ")
    backend = open_backend(parked["DAGQ_STORE"])
    client = WorkflowClient(backend)
    view, _ = frame(client, client.summary("parked-1"), True)  # dagq watch
    shown = [str(line) for line in view.renderables]
    backend.close()
    row = next(r for r in shown if "parked  attempt" in r)
    assert row.split()[0] == "queued" and "queued for " in row
    row = next(r for r in shown if "later  attempt" in r)
    assert row.split()[0] == "waiting" and "due in " in row


def test_task_says_queued_like_status(parked: dict[str, str]) -> None:
    out = dagq(parked, "task", "parked-1", "parked")
    assert out.stdout.splitlines()[0].startswith("parked: queued "), out.stdout
    out = dagq(parked, "task", "parked-1", "later")
    assert out.stdout.splitlines()[0].startswith("later: waiting "), out.stdout


@pytest.mark.parametrize(("row", "started", "took"), [
    ({"status": "running", "phase": "queued", "dispatched_at": 100.0}, None, "queued for 44s"),
    ({"status": "running", "phase": "queued", "dispatched_at": 50.0, "due_at": 100.0},
     None, "queued for 44s"),
    ({"status": "running", "phase": "waiting", "dispatched_at": 100.0, "due_at": 150.0},
     None, "due in 6.0s"),
    ({"status": "running", "phase": "started", "dispatched_at": 100.0}, 100.0, "44s"),
    ({"status": "failed", "phase": "failed", "dispatched_at": 100.0, "finished_at": 112.0},
     100.0, "12s"),
])
def test_started_and_took(row: dict[str, Any], started: float | None, took: str) -> None:
    assert started_at(row) == started
    assert took_text(row, 144.0) == took

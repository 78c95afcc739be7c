"""``dagq run`` runs its own workflow only (issue 31, point 4): a foreign workflow's task
queued on the same queue of the same store is left alone, and the run still completes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.cli.kit import dagq, define, store_env, submit_dispatched

pytestmark = pytest.mark.slow


def test_run_leaves_another_workflows_queued_task_alone(tmp_path: Path) -> None:
    env = store_env(tmp_path)
    marker = tmp_path / "foreign-ran"
    stuck = define(tmp_path, "stuck.yaml",
                   "name: stuck\ntasks:\n  - name: hang\n    queue: default\n"
                   f"    kwargs: {{cmd: 'touch {marker}; sleep 300'}}\n")
    submit_dispatched(env, stuck, "stuck-1")  # queued on 'default', no worker yet
    mine = define(tmp_path, "mine.yaml",
                  "name: mine\ntasks:\n  - name: a\n    queue: default\n"
                  "    kwargs: {cmd: 'echo a'}\n"
                  "  - name: b\n    depends_on: [a]\n    queue: default\n"
                  "    kwargs: {cmd: 'echo b'}\n")
    run = dagq(env, "run", "--id", "mine-1", "--workers", "2", "--json", str(mine),
               timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["status"] == "completed"
    assert not marker.exists()
    with sqlite3.connect(tmp_path / "x.db") as conn:
        (count,) = conn.execute("SELECT delivery_count FROM messages WHERE queue = 'default' "
                                "AND msg_id LIKE 'stuck-1/%'").fetchone()
    assert count == 0  # never delivered to dagq run's worker, not even released
    status = json.loads(dagq(env, "status", "stuck-1", "--json").stdout)
    (hang,) = status["tasks"]
    assert hang["status"] == "running" and hang["phase"] == "queued"

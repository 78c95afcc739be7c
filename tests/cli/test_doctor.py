"""`dagq doctor` against a real embedded store."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dagq.client import WorkflowClient
from dagq.config import Settings
from dagq.core.model import TaskDef, WorkflowDef
from dagq.runtime.coordinator import Coordinator
from dagq.wiring import backend_from_settings

DAGQ = str(Path(sys.executable).parent / "dagq")


def test_doctor_flags_overdue_tasks_and_queues_without_workers(tmp_path: Path) -> None:
    env = dict(os.environ, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}")
    settings = Settings.from_env(env)
    backend = backend_from_settings(settings)
    defn = WorkflowDef("late", (TaskDef("slow", {"cmd": "sleep 60"}, timeout_s=0.2,
                                        queue="nobody"),))
    wf_id = WorkflowClient(backend).submit(defn).id
    coord = Coordinator(backend, settings, children=WorkflowClient(backend))
    for _ in range(5):  # apply the start message: the task is dispatched (running)
        coord.step()
    assert WorkflowClient(backend).row(wf_id).status == "running"
    time.sleep(0.5)  # past the 0.2 s timeout, and no worker will ever take it

    out = subprocess.run([DAGQ, "doctor"], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1
    assert "queue 'nobody': 1 task(s) waiting and no live worker" in out.stdout
    assert f"task slow of {wf_id} is past its timeout" in out.stdout


def test_doctor_is_quiet_on_a_healthy_store(tmp_path: Path) -> None:
    env = dict(os.environ, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}")
    out = subprocess.run([DAGQ, "doctor"], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 problem(s) found" in out.stderr


def test_doctor_without_the_right_to_read_queue_lengths_says_so_and_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from dagq.cli import services
    from dagq.cli.main import cli
    from dagq.errors import MissingRight

    backend = backend_from_settings(Settings.from_env({"DAGQ_STORE": f"sqlite:{tmp_path}/x.db"}))

    def refused() -> list[str]:  # the injected fault: a namespace without Manage
        raise MissingRight("listing Service Bus queues: access refused: needs Manage")

    monkeypatch.setattr(backend.queues, "names", refused)
    monkeypatch.setattr(services, "backend_from_settings", lambda settings: backend)
    result = CliRunner().invoke(cli, ["doctor"], env={"DAGQ_STORE": f"sqlite:{tmp_path}/x.db"})
    assert result.exit_code == 0, result.output
    assert "SKIPPED queue lengths and the full queue list" in result.output
    assert "needs Manage" in result.output


def test_doctor_flags_an_attempt_whose_task_message_is_gone(tmp_path: Path) -> None:
    env = dict(os.environ, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}",
               DAGQ_VISIBILITY_TIMEOUT="0.2")
    settings = Settings.from_env(env)
    backend = backend_from_settings(settings)
    wf_id = WorkflowClient(backend).submit(
        WorkflowDef("gone", (TaskDef("a", {"cmd": "true"}),))).id
    coord = Coordinator(backend, settings, children=WorkflowClient(backend))
    while coord.step():
        pass
    coord.flush(time.time() + 60)  # the sent dispatch leaves the outbox
    queue = backend.queues.get("default")
    queue.delete_many(queue.receive(10, 60))  # the message is lost (e.g. a purged queue)
    time.sleep(0.5)  # longer than twice the visibility timeout
    out = subprocess.run([DAGQ, "doctor"], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1, out.stdout + out.stderr
    assert (f"task a of {wf_id} (attempt 1) waits for a task message that queue "
            "'default' no longer holds") in out.stdout

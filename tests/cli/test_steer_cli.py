"""``dagq suspend``, ``resume``, ``retry --task``, ``cancel --reason``, ``delete`` and
``@latest``, through the real command on a store of the test's own (no worker: the
coordinator steps in-process, so every effect is checked where it lands)."""

from __future__ import annotations

import json
from pathlib import Path

from dagq.backends import open_backend
from dagq.client import WorkflowClient
from dagq.config import Settings
from dagq.protocol import names
from dagq.protocol.messages import CompletionMessage
from dagq.runtime.coordinator import Coordinator
from tests.cli.kit import dagq, define, store_env, submit_dispatched

CHAIN = """name: chain
tasks:
  - {name: a, kwargs: {cmd: 'true'}}
  - {name: b, depends_on: [a], kwargs: {cmd: 'true'}}
  - {name: c, depends_on: [b], kwargs: {cmd: 'true'}}
"""


def _finish(env: dict[str, str], wf: str, *tasks: str) -> None:
    """Report ``tasks`` completed, as a worker would, and let the coordinator apply it."""
    backend = open_backend(env["DAGQ_STORE"])
    client = WorkflowClient(backend)
    coord = Coordinator(backend, Settings(store=env["DAGQ_STORE"]), children=client)
    state = client.state(wf)
    queue = backend.queues.get(names.COMPLETIONS)
    for task in tasks:
        queue.send(CompletionMessage(wf, task, state.task_view(task).attempt, True).encode(),
                   session_id=names.session_id(wf))
    while coord.step():
        pass


def _statuses(env: dict[str, str], wf: str) -> dict[str, tuple[str, int]]:
    rows = json.loads(dagq(env, "tasks", wf, "--json").stdout)
    return {r["name"]: (r["status"], r["attempt"]) for r in rows}


def test_suspend_holds_new_tasks_and_resume_sends_them(tmp_path: Path) -> None:
    env = store_env(tmp_path)
    submit_dispatched(env, define(tmp_path, "c.yaml", CHAIN), "wf1")
    res = dagq(env, "suspend", "@latest")  # the newest workflow
    assert res.returncode == 0, res.stderr
    assert json.loads(dagq(env, "status", "wf1", "--json").stdout)["suspended"] is True
    _finish(env, "wf1", "a")
    assert _statuses(env, "wf1")["b"] == ("ready", 0)
    assert dagq(env, "resume", "wf1").returncode == 0
    assert "suspended" not in json.loads(dagq(env, "status", "wf1", "--json").stdout)
    assert _statuses(env, "wf1")["b"][0] == "running"


def test_retry_of_one_task_runs_it_and_its_downstream_again(tmp_path: Path) -> None:
    env = store_env(tmp_path)
    submit_dispatched(env, define(tmp_path, "c.yaml", CHAIN), "wf1")
    _finish(env, "wf1", "a")
    _finish(env, "wf1", "b")
    _finish(env, "wf1", "c")
    assert dagq(env, "retry", "wf1").returncode == 6  # completed: nothing to retry
    res = dagq(env, "retry", "wf1", "--task", "b")
    assert res.returncode == 0, res.stderr
    backend = open_backend(env["DAGQ_STORE"])
    coord = Coordinator(backend, Settings(store=env["DAGQ_STORE"]),
                        children=WorkflowClient(backend))
    while coord.step():
        pass
    assert _statuses(env, "wf1") == {"a": ("completed", 1), "b": ("running", 2),
                                     "c": ("pending", 1)}
    assert dagq(env, "retry", "wf1", "--task", "nope").returncode == 5


def test_cancel_with_a_reason_and_delete(tmp_path: Path) -> None:
    env = store_env(tmp_path)
    submit_dispatched(env, define(tmp_path, "c.yaml", CHAIN), "wf1")
    res = dagq(env, "cancel", "wf1", "--reason", "wrong table")
    assert res.returncode == 0, res.stderr
    status = json.loads(dagq(env, "status", "wf1", "--json").stdout)
    assert status["cancel_reason"] == "wrong table"
    assert dagq(env, "delete", "wf1").returncode == 0  # cancelled: finished
    assert dagq(env, "status", "wf1").returncode == 5
    submit_dispatched(env, define(tmp_path, "c.yaml", CHAIN), "wf2")
    res = dagq(env, "delete", "wf2")
    assert res.returncode == 2 and "--force" in res.stderr  # still running
    assert dagq(env, "delete", "wf2", "--force").returncode == 0
    assert dagq(env, "status", "wf2").returncode == 5


def test_latest_names_the_newest_workflow_or_says_there_is_none(tmp_path: Path) -> None:
    env = store_env(tmp_path)
    submit_dispatched(env, define(tmp_path, "c.yaml", CHAIN), "first")
    submit_dispatched(env, define(tmp_path, "c.yaml", CHAIN), "second")
    out = json.loads(dagq(env, "status", "@latest", "--json").stdout)
    assert out["id"] == "second"
    assert json.loads(dagq(env, "status", "@latest:chain", "--json").stdout)["id"] == "second"
    res = dagq(env, "status", "@latest:other")
    assert res.returncode == 5 and "no workflow named 'other'" in res.stderr

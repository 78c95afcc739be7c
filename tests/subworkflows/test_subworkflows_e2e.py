"""Sub-workflows end to end on the embedded store, through real dagq processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from dagq.client import WorkflowClient
from dagq.compose import Chain
from dagq.config import Settings
from dagq.core.model import SubWorkflow, TaskDef, WorkflowDef
from dagq.wiring import backend_from_settings

DAGQ = str(Path(sys.executable).parent / "dagq")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "subworkflows"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return dict(os.environ, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}",
                DAGQ_CANCEL_POLL_INTERVAL="0.2", DAGQ_SWEEP_INTERVAL="0.5",
                DAGQ_IDLE_POLL="0.1", DAGQ_MAX_IDLE_BACKOFF="0.2")


def dagq(env: dict[str, str], *args: str, cwd: Path | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DAGQ, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def status(env: dict[str, str], wf_id: str) -> dict[str, Any]:
    out = dagq(env, "status", wf_id, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def wait_status(env: dict[str, str], wf_id: str, want: set[str],
                deadline: float = 60) -> dict[str, Any]:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        s = status(env, wf_id)
        if s["status"] in want:
            return s
        time.sleep(0.2)
    raise AssertionError(f"{wf_id} never reached {want}: {status(env, wf_id)}")


@pytest.fixture
def services(env: dict[str, str], tmp_path: Path) -> Iterator[None]:
    """A coordinator and a worker as background processes (cwd = tmp_path)."""
    procs = [subprocess.Popen([DAGQ, *args], env=env, cwd=tmp_path, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for args in (["coordinator"], ["worker", "default", "--concurrency", "4"])]
    yield
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait(timeout=30)


def client_for(env: dict[str, str]) -> WorkflowClient:
    return WorkflowClient(backend_from_settings(Settings.from_env(env)))


def _parent_of_child_file(tmp_path: Path) -> None:
    """parent.yaml: task ``sub`` runs child.yaml, then ``after`` depends on it."""
    (tmp_path / "parent.yaml").write_text(
        "name: parent\ntasks:\n  - name: sub\n    workflow: child.yaml\n"
        "  - name: after\n    depends_on: [sub]\n    kwargs: {cmd: 'true'}\n")


def test_child_workflows_complete_and_status_shows_the_tree(env: dict[str, str]) -> None:
    run = dagq(env, "run", str(EXAMPLES / "daily.yaml"))
    assert run.returncode == 0, run.stderr
    wf_id = run.stdout.split()[0]
    s = status(env, wf_id)
    assert s["status"] == "completed"
    children = {c["parent_task"]: c for c in s["children"]}
    assert set(children) == {"eu-etl", "us-etl"}
    assert all(c["status"] == "completed" and c["parent_id"] == wf_id
               for c in children.values())
    out = dagq(env, "output", children["eu-etl"]["id"], "extract")
    assert json.loads(out.stdout) == {"region": "eu", "rows": 100}
    piped = dagq(env, "status", wf_id)  # not a terminal: one "child" line per child workflow
    lines = [line.split("\t") for line in piped.stdout.splitlines()]
    assert {(f[0], f[2]) for f in lines if f[0] == "child"} == {("child", "eu-etl"),
                                                                 ("child", "us-etl")}
    assert any(f[0] == "child" and "eu-etl~1" in f[1] for f in lines)


def test_failing_child_fails_its_parent_task_and_retry_reruns_the_same_child(
        env: dict[str, str], tmp_path: Path) -> None:
    marker = tmp_path / "fixed"
    (tmp_path / "child.yaml").write_text(
        "name: child\ntasks:\n  - name: ok\n    kwargs: {cmd: 'true'}\n"
        f"  - name: fragile\n    depends_on: [ok]\n    kwargs: {{cmd: 'test -f {marker}'}}\n")
    _parent_of_child_file(tmp_path)
    run = dagq(env, "run", str(tmp_path / "parent.yaml"))
    assert run.returncode == 1
    wf_id = run.stdout.split()[0]
    tasks = {t["name"]: t for t in json.loads(
        dagq(env, "tasks", "--workflow", wf_id, "--json").stdout)}
    assert tasks["sub"]["status"] == "failed"
    assert tasks["after"]["status"] == "upstream_failed"
    (child,) = status(env, wf_id)["children"]
    assert child["status"] == "failed"

    marker.touch()
    client = client_for(env)
    client.retry(wf_id)
    coord = subprocess.Popen([DAGQ, "coordinator"], env=env, start_new_session=True,
                             stderr=subprocess.DEVNULL)
    worker = subprocess.Popen([DAGQ, "worker", "default"], env=env, start_new_session=True,
                              stderr=subprocess.DEVNULL)
    try:
        s = wait_status(env, wf_id, {"completed"})  # the retry is applied asynchronously
    finally:
        for p in (coord, worker):
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)
    assert s["status"] == "completed"
    (again,) = s["children"]  # the failed child was retried, not replaced
    assert again["id"] == child["id"] and again["status"] == "completed"
    child_tasks = {t["name"]: t for t in json.loads(
        dagq(env, "tasks", "--workflow", child["id"], "--json").stdout)}
    assert child_tasks["ok"]["attempt"] == 1  # only the failed part ran again
    assert child_tasks["fragile"]["attempt"] == 2


FACTORIES = '''
from dagq.core.model import TaskDef, WorkflowDef

def broken(region):
    raise RuntimeError(f"no data for {region}")

def cyclic(region):
    return WorkflowDef("cyclic", (TaskDef("a", {"cmd": "true"}, ("b",)),
                                  TaskDef("b", {"cmd": "true"}, ("a",))))
'''


@pytest.mark.parametrize(("factory", "expect"), [
    ("factories:broken", "RuntimeError: no data for eu"),
    ("factories:cyclic", "cycle"),
])
def test_child_that_cannot_be_submitted_fails_the_parent_task_at_once(
        env: dict[str, str], tmp_path: Path, services: None, factory: str, expect: str) -> None:
    (tmp_path / "factories.py").write_text(FACTORIES)
    defn = WorkflowDef("parent", (
        TaskDef("sub", workflow=SubWorkflow(factory=factory, params={"region": "eu"})),
        TaskDef("after", {"cmd": "true"}, ("sub",)),
        TaskDef("independent", {"cmd": "true"}),
    ))
    wf_id = client_for(env).submit(defn).id
    s = wait_status(env, wf_id, {"completed", "failed"})
    assert s["status"] == "failed"
    assert "children" not in s  # nothing was submitted
    tasks = {t["name"]: t for t in json.loads(
        dagq(env, "tasks", "--workflow", wf_id, "--json").stdout)}
    assert tasks["sub"]["status"] == "failed"
    assert "could not be submitted" in tasks["sub"]["error"]
    assert expect in tasks["sub"]["error"]
    assert tasks["after"]["status"] == "upstream_failed"
    assert tasks["independent"]["status"] == "completed"


def test_cancelling_the_parent_cancels_the_child_and_kills_its_task(
        env: dict[str, str], tmp_path: Path, services: None) -> None:
    pid_file = tmp_path / "pid"
    (tmp_path / "child.yaml").write_text(
        "name: child\ntasks:\n  - name: long\n"
        f"    kwargs: {{cmd: 'echo $$ > {pid_file}; exec sleep 300'}}\n")
    _parent_of_child_file(tmp_path)
    out = dagq(env, "submit", str(tmp_path / "parent.yaml"))
    assert out.returncode == 0, out.stderr
    wf_id = out.stdout.strip()
    end = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < end, "the child's task never started"
        time.sleep(0.1)
    pid = int(pid_file.read_text())
    assert dagq(env, "cancel", wf_id).returncode == 0
    s = wait_status(env, wf_id, {"cancelled", "completed", "failed"})
    assert s["status"] == "cancelled"
    (child,) = s["children"]
    assert wait_status(env, child["id"], {"cancelled", "completed", "failed"})["status"] \
        == "cancelled"
    end = time.monotonic() + 30
    while _alive(pid):
        assert time.monotonic() < end, f"task process {pid} survived the cancel"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_delayed_sub_workflow_task_starts_its_child_only_after_the_delay(
        env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "child.yaml").write_text(
        "name: child\ntasks:\n  - name: one\n    kwargs: {cmd: 'true'}\n")
    (tmp_path / "parent.yaml").write_text(
        "name: parent\ntasks:\n  - name: sub\n    workflow: child.yaml\n    delay_s: 1.5\n")
    run = dagq(env, "run", str(tmp_path / "parent.yaml"))
    assert run.returncode == 0, run.stderr
    (child,) = status(env, run.stdout.split()[0])["children"]
    def epoch(iso: str) -> float:  # the CLI prints times as ISO-8601 UTC
        return datetime.fromisoformat(iso).timestamp()

    not_before = epoch(child["extra"]["not_before"])
    assert not_before >= epoch(child["created_at"]) + 1.5 - 0.01
    (task,) = json.loads(dagq(env, "tasks", child["id"], "--json").stdout)
    assert epoch(task["dispatched_at"]) >= not_before - 0.01  # the start message was held back


BUILDER_FACTORY = '''
from dagq.compose import Chain, Workflow, task
from dagq.compose.factory import workflow_factory


@workflow_factory
def etl(region):
    return Workflow("etl", Chain(
        task("extract", cmd='echo "extracting $REGION"', env={"REGION": region}),
        task("load", cmd="true")))
'''


def test_python_builder_runs_factory_made_children(
        env: dict[str, str], tmp_path: Path, services: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from dagq.compose import Group, Workflow, task

    (tmp_path / "builder_factories.py").write_text(BUILDER_FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    import builder_factories  # type: ignore[import-not-found]

    wf = Workflow("daily", Chain(
        Group(task("eu", workflow=builder_factories.etl.as_step(region="eu")),
              task("us", workflow=builder_factories.etl.as_step(region="us"))),
        task("reconcile", cmd="true")))
    defn = wf.build()
    assert defn.task("eu").workflow is not None
    assert defn.task("eu").workflow.factory == "builder_factories:etl"
    wf_id = client_for(env).submit(defn).id
    s = wait_status(env, wf_id, {"completed", "failed"})
    assert s["status"] == "completed", s
    children = {c["parent_task"]: c for c in s["children"]}
    assert {k: c["status"] for k, c in children.items()} == {"eu": "completed",
                                                              "us": "completed"}
    for region, child in children.items():
        (extract,) = [t for t in json.loads(dagq(env, "tasks", "--workflow", child["id"],
                                                 "--json").stdout) if t["name"] == "extract"]
        assert extract["status"] == "completed", region

"""Plays the Functions host end to end: HTTP submit, a real `dagq worker` process running
the tasks, and the test delivering the completion queue to the coordinator handler."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.functions.timer import TimerRequest

from dagq.functions.runtime import Runtime
from tests.functions.host import (
    Handler,
    deliver_servicebus,
    deliver_storage_queue,
    http,
)

ROOT = Path(__file__).resolve().parents[2]
DAGQ = ROOT / ".venv" / "bin" / "dagq"
PIPELINE = b"""\
name: e2e
tasks:
  - name: extract
    kwargs: {cmd: "echo '{\\"rows\\": 3}' > \\"$DAGQ_OUTPUT_FILE\\""}
  - name: left
    kwargs: {cmd: "cat \\"$DAGQ_INPUTS_FILE\\" > /dev/null"}
    depends_on: [extract]
  - name: right
    kwargs: {cmd: "test \\"$DAGQ_TASK\\" = right"}
    depends_on: [extract]
    num_retries: 1
  - name: report
    kwargs: {cmd: "echo '\\"done\\"' > \\"$DAGQ_OUTPUT_FILE\\""}
    depends_on: [left, right]
"""
DELIVER = {"coordinator_queue": deliver_storage_queue,
           "coordinator_servicebus": deliver_servicebus}
DEADLINE_S = 120.0
"""Safety net against a hang, not a performance assertion."""


@pytest.fixture
def worker(app_env: dict[str, str], tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real worker process on the same store, stopped by its own pid at the end."""
    env = {**os.environ, **app_env, "DAGQ_MAX_IDLE_BACKOFF": "0.2"}
    log = (tmp_path / "worker.log").open("wb")
    proc = subprocess.Popen([str(DAGQ), "worker", "default", "--concurrency", "2"],
                            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
                            start_new_session=True)
    yield proc
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    log.close()


@pytest.mark.slow
@pytest.mark.parametrize("trigger", ["coordinator_queue", "coordinator_servicebus"])
def test_http_submit_worker_and_coordinator_handler(
        fns: dict[str, Handler], runtime: Runtime, worker: subprocess.Popen[bytes],
        trigger: str, tmp_path: Path) -> None:
    deliver = DELIVER[trigger]
    status, body = http(fns["submit_workflow"], "POST", "workflows", body=PIPELINE,
                        params={"id": f"e2e-{trigger}"})
    assert status == 201
    wf = body["id"]
    backend = runtime.backend()
    deadline = time.monotonic() + DEADLINE_S
    delivered = 0
    summary: dict[str, object] = {}
    while time.monotonic() < deadline:
        n = deliver(fns[trigger], backend)
        delivered += n
        _, summary = http(fns["get_workflow"], "GET", "", route={"id": wf})
        if summary["status"] in ("completed", "failed", "cancelled"):
            break
        if n == 0:
            time.sleep(0.1)
    log = (tmp_path / "worker.log").read_text(errors="replace")
    assert summary.get("status") == "completed", (summary, log[-2000:])
    assert worker.poll() is None, log[-2000:]
    assert delivered == 5  # the start request and one completion per task
    _, tasks = http(fns["list_tasks"], "GET", "", route={"id": wf})
    assert {t["name"]: (t["status"], t["attempt"], t["has_output"]) for t in tasks["tasks"]} == {
        "extract": ("completed", 1, True), "left": ("completed", 1, False),
        "right": ("completed", 1, False), "report": ("completed", 1, True)}
    assert runtime.client().output(wf, "report") == "done"
    fns["repair_sweep"](TimerRequest())  # a sweep after the end changes nothing
    assert runtime.client().summary(wf)["status"] == "completed"

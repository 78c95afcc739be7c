"""A worker killed with SIGKILL takes its task's process with it, and the attempt runs
exactly once more, on another worker (the dead worker's claim is taken over)."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import pytest

from dagq.worker import parentdeath
from tests.e2e.harness import Dagq, eventually, executions

pytestmark = pytest.mark.slow


def task_pids(workflow_id: str, task: str) -> list[int]:
    """Pids of live processes whose environment names this workflow's task."""
    want = {f"DAGQ_WORKFLOW_ID={workflow_id}".encode(), f"DAGQ_TASK={task}".encode()}
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            env = set((proc / "environ").read_bytes().split(b"\0"))
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if want <= env and state != "Z":
            pids.append(int(proc.name))
    return pids


@pytest.mark.skipif(not parentdeath.available(), reason="needs Linux (PR_SET_PDEATHSIG)")
def test_kill_9_of_a_worker_leaves_no_task_process_and_the_attempt_runs_once_more(
        dagq: Dagq) -> None:
    log, mark = dagq.root / "runs.log", dagq.root / "started"
    q = shlex.quote
    cmd = (f'echo "$DAGQ_WORKFLOW_ID $DAGQ_TASK $DAGQ_ATTEMPT" >> {q(str(log))}; '
           f"[ -e {q(str(mark))} ] || {{ touch {q(str(mark))}; exec sleep 30; }}")
    path = dagq.define("long", [{"name": "long", "kwargs": {"cmd": cmd}}])
    dagq.coordinator()
    lease = {"DAGQ_VISIBILITY_TIMEOUT": "2"}
    first = dagq.worker("default", concurrency=1, env=lease)
    wf = dagq.submit(path)
    # started = past its first command (the process alone may not have run a line yet)
    pids = eventually(lambda: mark.exists() and task_pids(wf, "long"), "the 30-s task to start")
    first.kill()
    time.sleep(2)
    assert task_pids(wf, "long") == [], f"task process(es) {pids} outlived their worker"

    second = dagq.worker("default", concurrency=1, env=lease)
    assert dagq.wait_terminal(wf)["status"] == "completed", dagq.diagnostics(wf)
    assert dagq.tasks(wf)["long"]["attempt"] == 1  # the same attempt, not a failed one
    assert executions(log) == [(wf, "long", 1), (wf, "long", 1)]
    assert second.stop() == 0
    assert "succeeded=1" in second.text(), second.text()

"""What users see after ``dagq cancel`` and ``dagq retry``: one scenario per function,
run through the real CLI on the embedded store (tests/e2e) and on Azurite
(tests/e2e_azure). Each takes a ``Dagq`` driver with no process running yet."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from dagq.config import Settings
from tests.e2e.harness import Dagq, eventually, executions, pid_alive

EXIT_FINISHED = 6
DEADLINE_S = 120.0


def _logged(log: Path, then: str = "true") -> str:
    return f'echo "$DAGQ_WORKFLOW_ID $DAGQ_TASK $DAGQ_ATTEMPT" >> {log}; {then}'


def retry_is_visible_at_once_and_run_finishes_it(d: Dagq) -> None:
    """``retry`` resets the state before it returns; ``dagq run --id`` then drives it."""
    log, marker = d.root / "retry.log", d.root / "fixed"
    path = d.define("fix-me", [
        {"name": "needs-fix", "kwargs": {"cmd": _logged(log, f"test -f {marker}")}},
        {"name": "after", "depends_on": ["needs-fix"], "kwargs": {"cmd": _logged(log)}},
    ])
    res = d.run("run", str(path), "--id", "fix-1", timeout_s=DEADLINE_S)
    assert res.returncode == 1 and d.status("fix-1")["status"] == "failed", res.stderr
    marker.write_text("ok\n")
    res = d.run("retry", "fix-1")
    assert res.returncode == 0, res.stderr
    summary = d.status("fix-1")  # no coordinator runs: this is the retry's own write
    assert (summary["status"], summary["counts"]) == ("running", {"pending": 2})
    assert d.statuses("fix-1") == {"needs-fix": "pending", "after": "pending"}
    assert "fix-1" not in [r["id"] for r in d.json("list", "--status", "failed")]
    res = d.run("run", str(path), "--id", "fix-1", timeout_s=DEADLINE_S)
    assert res.returncode == 0, res.stderr
    tasks = d.tasks("fix-1")
    assert (tasks["needs-fix"]["status"], tasks["needs-fix"]["attempt"]) == ("completed", 2)
    assert tasks["after"]["status"] == "completed"
    assert [(t, a) for _, t, a in executions(log)] == [
        ("needs-fix", 1), ("needs-fix", 2), ("after", 1)]


def cancel_before_any_coordinator_runs_nothing(d: Dagq) -> None:
    """A workflow cancelled before a coordinator took it up never starts a task."""
    log = d.root / "early.log"
    path = d.define("early", [{"name": "root", "kwargs": {"cmd": _logged(log)}},
                              {"name": "next", "depends_on": ["root"],
                               "kwargs": {"cmd": _logged(log)}}])
    wf = d.submit(path, "--id", "early-1")
    res = d.run("cancel", wf)
    assert res.returncode == 0, res.stderr
    summary = d.status(wf)
    assert (summary["status"], summary["cancel_requested"]) == ("cancelled", True)
    assert d.statuses(wf) == {"root": "cancelled", "next": "cancelled"}
    d.coordinator()
    d.worker()
    _quiet_for(d, wf, "cancelled")
    assert executions(log) == []


def cancel_with_a_message_nobody_serves(d: Dagq) -> None:
    """A dispatched task whose queue has no worker: the cancel ends it at once, and a
    worker started on that queue later drops the message without running it."""
    log = d.root / "orphan.log"
    path = d.define("orphan", [
        {"name": "here", "kwargs": {"cmd": _logged(log)}},
        {"name": "there", "queue": "nobody", "depends_on": ["here"],
         "kwargs": {"cmd": _logged(log)}},
    ])
    d.coordinator()
    d.worker()
    wf = d.submit(path, "--id", "orphan-1")
    eventually(lambda: d.statuses(wf)["there"] == "running", "task 'there' to be dispatched",
               DEADLINE_S)
    res = d.run("cancel", wf)
    assert res.returncode == 0 and f"{wf} cancelled" in res.stderr, res.stderr
    assert d.status(wf)["status"] == "cancelled"  # when the command returns, not later
    assert d.statuses(wf) == {"here": "completed", "there": "cancelled"}
    late = d.worker("nobody")
    eventually(lambda: "dropping" in late.text(), "the late worker to drop the message",
               DEADLINE_S)
    assert f"{wf}/there/1" in late.text()
    assert [t for _, t, _ in executions(log)] == ["here"]
    assert d.status(wf)["status"] == "cancelled"


def cancel_kills_an_escaped_grandchild_with_default_settings(d: Dagq) -> None:
    """A running task is reached with the default poll interval, and its whole tree goes,
    also a grandchild that left the task's process group with ``setsid``."""
    pidfile, grandfile = d.root / "task.pid", d.root / "grand.pid"
    d.task_pids += [pidfile, grandfile]
    path = d.define("escape", [{"name": "long", "kwargs": {
        "cmd": f"echo $$ > {pidfile}; setsid sleep 300 & echo $! > {grandfile}; wait"}}])
    default_poll = str(Settings().cancel_poll_interval)
    d.coordinator()
    d.worker(env={"DAGQ_CANCEL_POLL_INTERVAL": default_poll})
    wf = d.submit(path)
    eventually(lambda: grandfile.exists() and grandfile.read_text().strip(), "the task to start",
               DEADLINE_S)
    grand = int(grandfile.read_text())
    assert pid_alive(grand)
    res = d.run("cancel", wf)
    # the worker polls every 2 s: on a slow store it may have stopped the task and the
    # coordinator ended the workflow before `dagq cancel` reads the status back
    assert res.returncode == 0 and ("being stopped" in res.stderr
                                    or f"{wf} cancelled" in res.stderr), res.stderr
    summary = d.status(wf)  # the worker may have stopped the task already
    assert summary["status"] in ("running", "cancelled") and summary["cancel_requested"]
    assert d.wait_terminal(wf, DEADLINE_S)["status"] == "cancelled"
    eventually(lambda: not pid_alive(grand), "the setsid grandchild to be gone", 30.0)


def cancel_and_retry_of_finished_workflows_change_nothing(d: Dagq) -> None:
    """``cancel`` of a finished workflow and ``retry`` of a completed one say so, exit 6
    and leave the workflow as it was."""
    path = d.define("done", [{"name": "only", "kwargs": {"cmd": "true"}}])
    assert d.run("run", str(path), "--id", "done-1", timeout_s=DEADLINE_S).returncode == 0
    before = d.status("done-1")
    res = d.run("cancel", "done-1")
    assert res.returncode == EXIT_FINISHED
    assert "already completed: nothing to cancel" in res.stderr
    res = d.run("retry", "done-1")
    assert res.returncode == EXIT_FINISHED
    assert "already completed: nothing to retry" in res.stderr
    after = d.status("done-1")
    assert after == before and after["cancel_requested"] is False
    res = d.run("cancel", "no-such-workflow")
    assert res.returncode == 5 and "no workflow" in res.stderr  # not found


def _quiet_for(d: Dagq, wf: str, status: str, seconds: float = 3.0) -> None:
    """Watch the workflow for a while: it must keep ``status`` and start nothing."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert d.status(wf)["status"] == status
        time.sleep(0.3)



def ctrl_c_in_run_stops_the_workflow(d: Dagq) -> None:
    """Ctrl-C in ``dagq run`` cancels the workflow and stops its task without waiting
    for a poll; the command exits 1 and the workflow is ``cancelled``."""
    pidfile = d.root / "run.pid"
    d.task_pids.append(pidfile)
    path = d.define("interrupted", [
        {"name": "long", "kwargs": {"cmd": f"echo $$ > {pidfile}; exec sleep 300"}},
        {"name": "after", "depends_on": ["long"], "kwargs": {"cmd": "true"}}])
    runner = d.start("run", "run", str(path), "--id", "int-1")
    eventually(lambda: pidfile.exists() and pidfile.read_text().strip(), "the task to start",
               DEADLINE_S)
    pid = int(pidfile.read_text())
    runner.popen.send_signal(signal.SIGINT)
    assert runner.wait(DEADLINE_S) == 130, runner.text()  # interrupted
    assert "cancelling" in runner.text()
    summary = d.status("int-1")
    assert (summary["status"], summary["counts"]) == ("cancelled", {"cancelled": 2})
    eventually(lambda: not pid_alive(pid), "the task process to be gone", 30.0)

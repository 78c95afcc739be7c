"""The real ``dagq worker`` entrypoint as a process: GPU slots, drain on SIGTERM,
heartbeats, ``--check`` and ``dagq doctor``, on the embedded store and on Azurite."""

from __future__ import annotations

import signal
import sys
from typing import Any

import pytest

from dagq.protocol.heartbeats import LIVE_INTERVALS
from tests.e2e.harness import eventually
from tests.worker.stack import SCRIPTS, Stack, run_gpu_probes, wait_file

pytestmark = pytest.mark.slow
PY = sys.executable


def test_gpu_slots_give_each_running_task_its_own_devices(stack: Stack) -> None:
    """4 GPUs, 2 per task, 2 slots: every task sees 2 devices and tasks that ran at the
    same time never shared one."""
    stack.coordinator()
    stack.worker("gpu", "--gpus-per-task", "2", "--gpus", "0,1,2,3", "--concurrency", "2")
    for name, rec in run_gpu_probes(stack, "gpu").items():
        mine = set(rec["devices"].split(","))
        assert len(mine) == 2 and mine <= {"0", "1", "2", "3"}, (name, rec)


def test_too_few_gpus_for_one_task_is_a_clear_start_up_error(sqlite_stack: Stack) -> None:
    res = sqlite_stack.run("worker", "gpu", "--gpus-per-task", "2", "--gpus", "0")
    assert res.returncode == 1
    assert "--gpus-per-task 2 needs at least 2 GPU(s) but 1 were found (0)" in res.stderr
    assert "Traceback" not in res.stderr


def test_sigterm_releases_the_running_task_to_another_worker(stack: Stack) -> None:
    """Worker A is terminated mid-task: the task process gets SIGTERM, the message comes
    back at once (long before the 60 s visibility timeout), worker B completes it, and
    the attempt stays 1. Heartbeats and ``--check`` follow the workers' lives."""
    probe = stack.root / "probe"
    probe.mkdir()
    stack.coordinator()
    a = stack.worker("spot")
    wf = stack.submit("drain", [{"name": "train", "kwargs": {
        "cmd": f"{PY} {SCRIPTS / 'preempt.py'} {probe}"}}], default_queue="spot")
    wait_file(probe / "first")

    key = f"{wf}/train/1"
    def running_it() -> dict[str, Any] | None:
        beat = stack.heartbeat(a)
        return beat if beat is not None and key in beat["running"] else None

    beat = eventually(running_it, f"worker A's heartbeat to list {key}", 30)
    assert beat["queue"] == "spot" and beat["host"] and not beat["stopped"]
    assert beat["last_seen"] > 0
    assert stack.run("worker", "spot", "--check").returncode == 0

    b = stack.worker("spot")
    stack.wait_heartbeat(b)
    a.popen.send_signal(signal.SIGTERM)
    assert a.wait(30) == 0, a.text()
    assert wait_file(probe / "term") == f"{(probe / 'first').read_text()}"
    assert "released=1" in a.text()
    assert stack.heartbeat(a)["stopped"] is True  # type: ignore[index]

    # B gets the message well inside the visibility timeout (60 s): it was released
    assert stack.wait_terminal(wf, deadline_s=20) == "completed"
    assert (probe / "second").read_text() == "1 after-term"
    assert stack.tasks(wf)["train"]["attempt"] == 1

    assert b.stop() == 0
    assert stack.heartbeat(b)["stopped"] is True  # type: ignore[index]
    res = stack.run("worker", "spot", "--ready")
    assert res.returncode == 1 and "no live, healthy worker for 'spot'" in res.stderr
    res = stack.run("worker", "spot", "--check")  # its liveness file went with it
    assert res.returncode == 1 and "no liveness file" in res.stderr


def test_a_draining_worker_keeps_the_message_hidden_until_its_task_has_exited(
        sqlite_stack: Stack) -> None:
    """The task needs longer to honour SIGTERM than the visibility timeout: worker B must
    not start it while worker A's process still runs."""
    stack, probe = sqlite_stack, sqlite_stack.root / "probe"
    probe.mkdir()
    env = {"DAGQ_VISIBILITY_TIMEOUT": "1"}
    stack.coordinator()
    a = stack.worker("spot", env=env)
    wf = stack.submit("slow-drain", [{"name": "train", "kwargs": {
        "cmd": f"{PY} {SCRIPTS / 'preempt.py'} {probe} 3"}}], default_queue="spot")
    wait_file(probe / "first")
    b = stack.worker("spot", env=env)
    stack.wait_heartbeat(b)
    a.popen.send_signal(signal.SIGTERM)
    assert a.wait(30) == 0, a.text()
    assert stack.wait_terminal(wf, deadline_s=30) == "completed"
    assert (probe / "second").read_text() == "1 after-term"
    assert stack.tasks(wf)["train"]["attempt"] == 1


def test_a_killed_worker_stops_counting_as_live(sqlite_stack: Stack) -> None:
    """No last heartbeat after SIGKILL: ``--ready`` fails once the record is stale."""
    w = sqlite_stack.worker("cpu")
    sqlite_stack.wait_heartbeat(w)
    assert sqlite_stack.run("worker", "cpu", "--ready").returncode == 0
    assert sqlite_stack.run("worker", "cpu", "--check").returncode == 0
    w.kill()
    record = sqlite_stack.heartbeat(w)
    assert record is not None and record["stopped"] is False
    assert record["interval"] == 0.5 and LIVE_INTERVALS * 0.5 < 5
    eventually(lambda: sqlite_stack.run("worker", "cpu", "--ready").returncode == 1,
               "--ready to fail for a killed worker", 30)


def test_doctor_flags_a_queue_without_workers_and_lists_live_ones(stack: Stack) -> None:
    stack.coordinator()
    w = stack.worker("cpu")
    stack.wait_heartbeat(w)
    wf = stack.submit("orphan", [{"name": "t", "queue": "nobody", "kwargs": {"cmd": "true"}}])

    def flagged() -> str | None:
        res = stack.run("doctor")
        return res.stdout if res.returncode == 1 and "'nobody'" in res.stdout else None

    out = eventually(flagged, "dagq doctor to flag queue 'nobody'", 30)
    # piped: tab-separated lines whose first field says what they are
    assert "problem\tqueue 'nobody': 1 task(s) waiting and no live worker" in out
    assert "dagq worker nobody" in out
    lines = [ln.split("\t") for ln in out.splitlines()]
    assert any(ln[:3] == ["worker", "cpu", stack.heartbeat(w)["id"]] for ln in lines), out  # type: ignore[index]

    n = stack.worker("nobody")
    assert stack.wait_terminal(wf) == "completed"
    assert n.stop() == 0 and w.stop() == 0
    res = stack.run("doctor")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout == "" and "0 problem(s) found" in res.stderr

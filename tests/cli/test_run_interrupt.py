"""Ctrl-C during `dagq run` cancels the workflow cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

DAGQ = str(Path(sys.executable).parent / "dagq")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGQ_")}
    return dict(env, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}")


def _wait_for_pid(pid_file: Path) -> int:
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline, "the task never started"
        time.sleep(0.1)
    return int(pid_file.read_text())


def test_ctrl_c_cancels_the_workflow_and_stops_its_tasks(tmp_path: Path) -> None:
    env = _env(tmp_path)  # default settings: the local workers are stopped directly
    pid_file = tmp_path / "pid"
    (tmp_path / "wf.yaml").write_text(
        "name: long\ntasks:\n"
        f"  - name: sleeper\n    kwargs: {{cmd: 'echo $$ > {pid_file}; exec sleep 300'}}\n"
        "  - name: after\n    depends_on: [sleeper]\n    kwargs: {cmd: 'true'}\n")
    run = subprocess.Popen([DAGQ, "run", str(tmp_path / "wf.yaml")], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid = _wait_for_pid(pid_file)
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 130, err  # interrupted, as shells report Ctrl-C
    assert "cancelling" in err
    wf_id = out.split()[0]
    status = json.loads(subprocess.run([DAGQ, "status", wf_id, "--json"], env=env,
                                       capture_output=True, text=True, check=True).stdout)
    assert status["status"] == "cancelled"
    assert status["counts"] == {"cancelled": 2}
    deadline = time.monotonic() + 30
    while _alive(pid):
        assert time.monotonic() < deadline, f"task process {pid} survived Ctrl-C"
        time.sleep(0.1)


def test_a_second_ctrl_c_kills_a_task_that_ignores_sigterm(tmp_path: Path) -> None:
    env = _env(tmp_path)  # DAGQ_KILL_TIMEOUT keeps its default of 600 s
    pid_file = tmp_path / "pid"
    cmd = f"trap '' TERM; echo $$ > {pid_file}; while true; do sleep 1; done"
    (tmp_path / "wf.yaml").write_text(json.dumps(
        {"name": "stubborn", "tasks": [{"name": "sleeper", "kwargs": {"cmd": cmd}}]}))
    run = subprocess.Popen([DAGQ, "run", str(tmp_path / "wf.yaml")], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid = _wait_for_pid(pid_file)
    run.send_signal(signal.SIGINT)
    time.sleep(1.5)
    assert run.poll() is None and _alive(pid)  # SIGTERM is ignored; the grace is long
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=30)
    assert run.returncode == 130, err  # interrupted, as shells report Ctrl-C
    assert "killed 1 task process tree" in err
    deadline = time.monotonic() + 10
    while _alive(pid):
        assert time.monotonic() < deadline, f"task process {pid} survived the second Ctrl-C"
        time.sleep(0.1)

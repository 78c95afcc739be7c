"""Stopping a task stops its whole process tree, also processes that left its group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dagq.worker import proctree
from dagq.worker.process import kill_all_now, run_process
from tests.e2e.harness import eventually, kill_pidfile, pid_alive

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

ESCAPE = ("echo $$ > {root}; setsid sleep 300 & echo $! > {pids}; "
          "( setsid sh -c 'sleep 301 & echo $! >> {pids}; wait' & ); "
          "echo started >> {pids}; wait")
"""A task whose grandchildren leave its session: one directly, one via a subshell that
exits at once (so its child is re-parented)."""


def _pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split() if x.isdigit()]


def _start(tmp_path: Path, cmd: str, stop: threading.Event, kill_timeout: float = 5.0,
           ) -> tuple[threading.Thread, dict[str, object]]:
    result: dict[str, object] = {}

    def target() -> None:
        result["r"] = run_process(["/bin/sh", "-c", cmd], env=dict(os.environ), cwd=None,
                                  log_path=tmp_path / "log", stop=stop, timeout_s=None,
                                  kill_timeout=kill_timeout)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, result


def test_stop_kills_descendants_that_left_the_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    stop = threading.Event()
    root = tmp_path / "root"
    t, result = _start(tmp_path, ESCAPE.format(pids=pids, root=root), stop)
    try:
        eventually(lambda: pids.exists() and len(_pids(pids)) == 2, "both grandchildren")
        escaped = _pids(pids)
        group = _pids(root)[0]
        assert all(os.getpgid(p) != group for p in escaped)  # really outside the task's group
        stop.set()
        t.join(30)
        assert not t.is_alive()
        assert result["r"].stopped  # type: ignore[attr-defined]
        for pid in escaped:
            eventually(lambda p=pid: not pid_alive(p), f"escaped process {pid} to be gone", 10)
    finally:
        kill_pidfile(pids)


def test_members_follow_parent_links_and_the_environment_token(tmp_path: Path) -> None:
    token = proctree.new_token()
    env = {**os.environ, proctree.TOKEN_ENV: token}
    pidfile = tmp_path / "pid"
    proc = subprocess.Popen(["/bin/sh", "-c", f"setsid sleep 300 & echo $! > {pidfile}; wait"],
                            env=env, start_new_session=True)
    try:
        eventually(lambda: pidfile.exists() and _pids(pidfile), "the grandchild")
        child = _pids(pidfile)[0]
        assert {proc.pid, child} <= {m[0] for m in proctree.members(proc.pid, token)}
        assert child in {m[0] for m in proctree.members(proc.pid, None)}  # parent link
        assert child in {m[0] for m in proctree.own_descendants()}
    finally:
        kill_pidfile(pidfile)
        proc.kill()
        proc.wait()


def test_a_recycled_pid_is_not_a_member() -> None:
    me = next(m for m in proctree.members(os.getpid(), None) if m[0] == os.getpid())
    assert proctree.alive(me)
    assert not proctree.alive((me[0], me[1] + 1))  # same pid, another start time


def test_kill_all_now_skips_the_sigterm_grace(tmp_path: Path) -> None:
    stop = threading.Event()
    pids = tmp_path / "pids"
    t, result = _start(tmp_path, f"trap '' TERM; echo $$ > {pids}; while true; do sleep 1; done",
                       stop, kill_timeout=600)
    eventually(lambda: pids.exists() and _pids(pids), "the task")
    stop.set()
    time.sleep(0.3)
    assert t.is_alive()  # it ignores SIGTERM and has 600 s of grace
    assert kill_all_now() == 1
    t.join(10)
    assert not t.is_alive()
    assert result["r"].returncode == -signal.SIGKILL  # type: ignore[attr-defined]


def test_subreaper_reaps_orphans(tmp_path: Path) -> None:
    code = ("from dagq.worker import proctree; import subprocess, time, os\n"
            "assert proctree.enable_subreaper()\n"
            "subprocess.run(['/bin/sh', '-c', '(sleep 0.2 &)'])\n"
            "me = os.getpid()\n"
            "orphan = lambda: [p for p, _ in proctree.own_descendants()]\n"
            "time.sleep(0.1); assert orphan(), 'orphan should be re-parented to us'\n"
            "time.sleep(0.5); print(proctree.reap_orphans())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"

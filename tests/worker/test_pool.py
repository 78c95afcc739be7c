"""``dagq worker --processes N``: the pool that forks, watches, replaces and stops worker
processes (``dagq.worker.pool``), with stand-in children and with the real worker."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dagq.config import ConfigError
from dagq.protocol.heartbeats import PARTITION
from dagq.worker.gpu import shares
from dagq.worker.pool import ProcessPool
from tests.e2e.harness import eventually
from tests.worker.stack import SCRIPTS, Stack, run_gpu_probes

PY = sys.executable


class Pool:
    """``scripts/pooled.py`` running as a process."""

    def __init__(self, root: Path, mode: str, size: int = 2, early: float = 0.0,
                 stale: float = 60.0) -> None:
        self.root = root
        self.out = root / "pool.out"
        self.popen = subprocess.Popen(
            [PY, str(SCRIPTS / "pooled.py"), mode, str(root), str(size), str(early), str(stale)],
            stdout=self.out.open("wb"), stderr=subprocess.STDOUT)

    def started(self, index: int) -> list[int]:
        """Pids of the children started as ``index`` so far."""
        return sorted(int(p.name.split(".")[2]) for p in self.root.glob(f"started.{index}.*"))

    def stopped(self) -> set[int]:
        return {int(p.name.split(".")[2]) for p in self.root.glob("stopped.*")}

    def text(self) -> str:
        return self.out.read_text()

    def wait(self) -> int:
        try:
            return self.popen.wait(30)
        finally:
            if self.popen.poll() is None:
                self.popen.kill()


def test_each_child_runs_with_its_own_index_and_sigterm_stops_them_all(tmp_path: Path) -> None:
    pool = Pool(tmp_path, "wait")
    pids = eventually(lambda: (pool.started(0), pool.started(1))
                      if pool.started(0) and pool.started(1) else None, "two children")
    assert len(pids[0]) == len(pids[1]) == 1 and pids[0] != pids[1]
    pool.popen.send_signal(signal.SIGTERM)
    assert pool.wait() == 0, pool.text()
    assert pool.stopped() == {pids[0][0], pids[1][0]}, "each child stopped cleanly"
    assert "SIGTERM, stopping 2 worker process(es)" in pool.text()


def test_children_that_end_with_status_0_are_not_replaced(tmp_path: Path) -> None:
    pool = Pool(tmp_path, "done")
    assert pool.wait() == 0, pool.text()
    assert len(pool.started(0)) == len(pool.started(1)) == 1


def test_a_failure_at_start_stops_the_pool_with_that_status(tmp_path: Path) -> None:
    pool = Pool(tmp_path, "fail", early=30.0)
    assert pool.wait() == 3, pool.text()
    assert "exited with status 3 at start; stopping the pool" in pool.text()
    assert len(pool.started(0)) <= 1 and len(pool.started(1)) <= 1, "nothing restarted"


def test_a_killed_child_is_replaced_and_says_so(tmp_path: Path) -> None:
    pool = Pool(tmp_path, "wait")
    first = eventually(lambda: pool.started(0) or None, "child 0")[0]
    eventually(lambda: pool.started(1) or None, "child 1")
    os.kill(first, signal.SIGKILL)
    again = eventually(lambda: [p for p in pool.started(0) if p != first] or None,
                       "a new child 0")
    assert len(pool.started(1)) == 1, "the other child was left alone"
    assert "worker process 0 was killed by SIGKILL; starting another in 1s" in pool.text()
    pool.popen.send_signal(signal.SIGTERM)
    assert pool.wait() == 0, pool.text()
    assert again[0] in pool.stopped()


def test_children_stop_when_the_pool_is_killed(tmp_path: Path) -> None:
    pool = Pool(tmp_path, "wait")
    pids = eventually(lambda: pool.started(0) + pool.started(1)
                      if pool.started(0) and pool.started(1) else None, "two children")
    pool.popen.kill()
    pool.popen.wait()
    assert eventually(lambda: pool.stopped() == set(pids), "both children to stop", 10)


def test_the_pools_liveness_file_goes_stale_when_one_child_stops_touching_its_own(
        tmp_path: Path) -> None:
    pool = Pool(tmp_path, "stuck", stale=1.0)
    eventually(lambda: "looks stuck" in pool.text(), "the pool to see child 1 stuck", 10)
    assert "worker process 1 (pid" in pool.text() and "`--check` fails" in pool.text()
    touched = (tmp_path / "pool.alive").stat().st_mtime
    time.sleep(0.5)
    assert (tmp_path / "pool.alive").stat().st_mtime == touched, "not touched while stuck"
    pool.popen.send_signal(signal.SIGTERM)
    assert pool.wait() == 0


def test_the_pools_liveness_file_is_touched_while_every_child_touches_its_own(
        tmp_path: Path) -> None:
    pool = Pool(tmp_path, "wait", stale=1.0)
    eventually(lambda: (tmp_path / "pool.alive").exists(), "the pool's liveness file")
    time.sleep(1.5)  # past the children's start-up grace
    before = (tmp_path / "pool.alive").stat().st_mtime
    assert eventually(lambda: (tmp_path / "pool.alive").stat().st_mtime > before,
                      "the pool's liveness file to be touched again", 5)
    assert (tmp_path / "pool.alive.0").exists() and (tmp_path / "pool.alive.1").exists()
    assert "stuck" not in pool.text()
    pool.popen.send_signal(signal.SIGTERM)
    assert pool.wait() == 0
    assert not (tmp_path / "pool.alive").exists(), "the pool removes its file on the way out"


def test_gpus_are_split_into_disjoint_parts_one_per_process() -> None:
    assert shares(["a", "b", "c"], 2, 0, 1) == [["a", "b"], ["c"]]
    assert shares(["a", "b", "c", "d"], 2, 2, 1) == [["a", "b"], ["c", "d"]]
    assert shares(["a"], 3, 0, 1) == [["a"], [], []]
    assert shares(None, 1, 1, 1) == [None], "one process detects its GPUs itself"
    with pytest.raises(ConfigError, match=r"--processes 2 x --concurrency 2 with "
                       r"--gpus-per-task 1 needs 4 GPU\(s\) \(2 per process\) but 3 were found"):
        shares(["a", "b", "c"], 2, 1, 2)


@pytest.mark.slow
def test_a_pool_of_real_workers_shares_the_queue_and_never_the_gpus(
        sqlite_stack: Stack) -> None:
    """Two processes of one slot, 2 GPUs per task out of 4: both processes run tasks, two
    tasks run at once, never on the same device; SIGTERM stops the pool with status 0."""
    stack = sqlite_stack
    stack.coordinator()
    pool = stack.worker("gpu", "--processes", "2", "--gpus-per-task", "2", "--gpus", "0,1,2,3")
    for name, rec in run_gpu_probes(stack, "gpu").items():
        assert set(rec["devices"].split(",")) in ({"0", "1"}, {"2", "3"}), (name, rec)
    workers = {key for key, rec in stack.backend.records.list(PARTITION)
               if rec.get("queue") == "gpu" and rec.get("pid") != pool.popen.pid}
    assert len(workers) == 2, f"two worker processes, each with its own id: {workers}"
    assert stack.run("worker", "gpu", "--check").returncode == 0
    assert pool.stop() == 0, pool.text()
    assert pool.text().count("stopped after") == 2, pool.text()


def test_a_fork_that_fails_is_retried_later_and_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At the process limit ``fork`` fails (EAGAIN): the pool must neither end with a
    traceback nor spin; it says so and tries again after the child's pause."""
    lines: list[str] = []
    pool = ProcessPool(1, lambda index: 0, tmp_path / "pool.alive", echo=lines.append)

    def no_fork() -> int:
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    child = pool.children[0]
    before = time.monotonic()
    pool._start(child)
    assert child.pid == 0 and child.due >= before + 1.0
    assert child.pause == 2.0, "the next failure waits longer"
    assert lines == ["worker pool: worker process 0 could not be started ([Errno 11] "
                     "Resource temporarily unavailable); starting another in 1s"]


def test_a_closed_stderr_does_not_stop_the_pool(tmp_path: Path) -> None:
    def broken(line: str) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    pool = ProcessPool(1, lambda index: 0, tmp_path / "pool.alive", echo=broken)
    pool._later(pool.children[0], "was killed by SIGKILL")  # says it: must not raise
    assert pool.children[0].due > 0

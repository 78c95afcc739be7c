"""Cancellation benchmark, default settings: how long from ``dagq cancel`` (or Ctrl-C in
``dagq run``) until a running task's processes are gone, and what the worker's cancel
polling costs in store reads while it runs tasks.

    .venv/bin/python bench/cancel_bench.py            # embedded SQLite store
    .venv/bin/python bench/cancel_bench.py --runs 5   # fewer samples

(a) Cancel: a worker runs a task whose grandchild left its process group (``setsid``);
    latency = start of the cancel (``WorkflowClient.cancel``, what ``dagq cancel`` runs;
    ``--cli`` to time the command, Python start-up included) until the task and the
    grandchild are gone. Cancels are spread over the poll interval (sample i waits i x interval/runs
    after the task started), so the median is that of a cancel arriving at a random time.
(b) Ctrl-C in ``dagq run``: SIGINT until the task process is gone.
(c) Reads: a worker busy with one task for ``--busy`` seconds, stopped with SIGTERM; its
    request counts (``DAGQ_STATS_FILE``) give the reads per minute spent on cancellation.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dagq.backends import open_backend  # noqa: E402
from dagq.client import WorkflowClient  # noqa: E402
from dagq.config import Settings  # noqa: E402

DAGQ = str(Path(sys.executable).parent / "dagq")


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _wait_file(path: Path, deadline_s: float = 60.0) -> list[int]:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if path.exists():
            pids = [int(x) for x in path.read_text().split() if x.isdigit()]
            if len(pids) >= 2:
                return pids
        time.sleep(0.01)
    raise SystemExit(f"{path} never appeared: the task did not start")


class Gone:
    """Watches ``pids`` from now on (in a thread, so a blocking call can run meanwhile)."""

    def __init__(self, pids: list[int]) -> None:
        self.t0 = time.monotonic()
        self.at = 0.0
        self._thread = threading.Thread(target=self._watch, args=(pids,), daemon=True)
        self._thread.start()

    def _watch(self, pids: list[int]) -> None:
        while any(_alive(p) for p in pids):
            time.sleep(0.005)
        self.at = time.monotonic()

    def seconds(self) -> float:
        """Seconds from the start of watching until every pid was gone."""
        self._thread.join()
        return self.at - self.t0


class Env:
    """A temporary embedded store and the processes started on it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        base = {k: v for k, v in os.environ.items() if not k.startswith("DAGQ_")}
        self.env = {**base, "DAGQ_STORE": f"sqlite:{root / 'bench.db'}"}
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str, **extra: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([DAGQ, *args], env={**self.env, **extra}, cwd=self.root,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc

    def cli(self, *args: str) -> str:
        return subprocess.run([DAGQ, *args], env=self.env, cwd=self.root, check=True,
                              capture_output=True, text=True).stdout

    def definition(self, name: str, pidfile: Path) -> Path:
        cmd = f"echo $$ > {pidfile}; setsid sleep 300 & echo $! >> {pidfile}; wait"
        path = self.root / f"{name}.json"
        path.write_text(json.dumps({"name": name, "tasks": [
            {"name": "long", "kwargs": {"cmd": cmd}}]}))
        return path

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            p.wait(30)


def bench_cancel(env: Env, runs: int, interval: float,
                 via_cli: bool) -> tuple[list[float], list[float]]:
    """Seconds from the start of the cancel until the tree is gone, and how long the
    cancel call took (with ``via_cli``: the ``dagq cancel`` command, Python start-up
    included; else ``WorkflowClient.cancel`` in this process, what the command runs)."""
    client = WorkflowClient(open_backend(env.env["DAGQ_STORE"]))
    env.start("coordinator")
    env.start("worker", "default")
    gone, command = [], []
    for i in range(runs):
        pidfile = env.root / f"cancel-{i}.pid"
        wf = env.cli("submit", str(env.definition(f"cancel-{i}", pidfile))).strip()
        pids = _wait_file(pidfile)
        time.sleep(i * interval / runs)
        watch = Gone(pids)
        if via_cli:
            env.cli("cancel", wf)
        else:
            client.cancel(wf)
        command.append(time.monotonic() - watch.t0)
        gone.append(watch.seconds())
    return gone, command


def bench_ctrl_c(env: Env, runs: int) -> tuple[list[float], list[float]]:
    """Seconds from SIGINT until the task's tree is gone, and until ``dagq run`` exited."""
    gone, exited = [], []
    for i in range(runs):
        pidfile = env.root / f"run-{i}.pid"
        proc = env.start("run", str(env.definition(f"run-{i}", pidfile)))
        pids = _wait_file(pidfile)
        watch = Gone(pids)
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
        exited.append(time.monotonic() - watch.t0)
        gone.append(watch.seconds())
    return gone, exited


def bench_reads(env: Env, busy_s: float) -> dict[str, float]:
    stats = env.root / "stats.jsonl"
    env.start("coordinator")
    worker = env.start("worker", "default", DAGQ_STATS_FILE=str(stats))
    pidfile = env.root / "busy.pid"
    wf = env.cli("submit", str(env.definition("busy", pidfile))).strip()
    _wait_file(pidfile)
    time.sleep(1.0)  # let start-up requests settle
    before = time.monotonic()
    time.sleep(busy_s)
    worker.send_signal(signal.SIGTERM)
    worker.wait(60)
    busy = time.monotonic() - before
    record = json.loads(stats.read_text().splitlines()[-1])
    env.cli("cancel", wf)
    polls = record["counts"].get("cancel_polls", 0)
    return {"busy_s": busy, "polls": polls, "record_lists": record["requests"].get(
        "record.list", 0), "polls_per_min": polls / busy * 60}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--busy", type=float, default=30.0)
    parser.add_argument("--cli", action="store_true",
                        help="cancel with the dagq command instead of the client in-process")
    args = parser.parse_args()
    interval = Settings().cancel_poll_interval
    with tempfile.TemporaryDirectory(prefix="dagq-cancel-bench-") as tmp:
        env = Env(Path(tmp))
        try:
            cancel, command = bench_cancel(env, args.runs, interval, args.cli)
            env.close()
            env.procs.clear()
            ctrl_c, run_exit = bench_ctrl_c(env, max(3, args.runs // 2))
            reads = bench_reads(env, args.busy)
        finally:
            env.close()
    print(f"DAGQ_CANCEL_POLL_INTERVAL default: {interval:g}s")
    how = "dagq cancel" if args.cli else "WorkflowClient.cancel"
    for name, xs in ((f"{how} -> tree gone", cancel), (f"{how} call", command),
                     ("Ctrl-C -> task gone", ctrl_c), ("Ctrl-C -> dagq run exited", run_exit)):
        print(f"{name}: median {statistics.median(xs):.2f}s, min {min(xs):.2f}s, "
              f"max {max(xs):.2f}s over {len(xs)} runs")
    print(f"busy worker: {reads['polls']:.0f} cancel polls and {reads['record_lists']:.0f} "
          f"record lists in {reads['busy_s']:.1f}s = {reads['polls_per_min']:.1f} "
          "cancel reads per minute")


if __name__ == "__main__":
    main()

"""End-to-end runtime benchmark: tasks/s, per-hop latency, coordinator completions/s,
store requests per task and peak memory, with a coordinator and a worker already running.

    .venv/bin/python bench/runtime_bench.py                 # embedded SQLite store
    .venv/bin/python bench/runtime_bench.py --azurite       # the project's Azurite
    .venv/bin/python bench/runtime_bench.py --store azure://ACCOUNT/PREFIX  # any store

Scenarios: (a) fan-out/fan-in of 1 root, N parallel `true` tasks and 1 sink; (b) a chain;
(c) a lattice of layers where each task depends on every task of the layer before;
(d) coordinator alone on synthetic completions; (e) requests per task; (f) peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dagq.client import WorkflowClient  # noqa: E402
from dagq.config import Settings  # noqa: E402
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES, TaskDef, WorkflowDef  # noqa: E402
from dagq.protocol.messages import CompletionMessage, decode_task  # noqa: E402
from dagq.runtime.coordinator import Coordinator  # noqa: E402
from dagq.wiring import backend_from_settings  # noqa: E402

DAGQ = str(Path(sys.executable).parent / "dagq")


CMD = {"cmd": "true"}
"""Every task's kwargs (``--task-cmd`` changes the command)."""


def fan(n: int) -> WorkflowDef:
    """1 root, ``n`` parallel tasks, 1 sink."""
    mids = tuple(TaskDef(f"t{i}", CMD, ("root",)) for i in range(n))
    sink = TaskDef("sink", CMD, tuple(t.name for t in mids))
    return WorkflowDef("bench-fan", (TaskDef("root", CMD), *mids, sink))


def chain(n: int) -> WorkflowDef:
    """``n`` tasks, each depending on the previous one."""
    return WorkflowDef("bench-chain", tuple(
        TaskDef(f"c{i}", CMD, (f"c{i - 1}",) if i else ()) for i in range(n)))


def lattice(layers: int, width: int) -> WorkflowDef:
    """``layers`` x ``width`` tasks; each depends on every task of the previous layer."""
    tasks = []
    for layer in range(layers):
        deps = tuple(f"l{layer - 1}-{j}" for j in range(width)) if layer else ()
        tasks += [TaskDef(f"l{layer}-{j}", CMD, deps) for j in range(width)]
    return WorkflowDef("bench-lattice", tuple(tasks))


def wait_terminal(client: WorkflowClient, wf_id: str, timeout: float = 600) -> str:
    """Poll the index row until the workflow is terminal; returns the status."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.row(wf_id).status
        if status in TERMINAL_WORKFLOW_STATUSES:
            return status
        time.sleep(0.005)
    raise TimeoutError(f"{wf_id} did not finish in {timeout}s")


def timed(client: WorkflowClient, defn: WorkflowDef) -> float:
    """Seconds from submission until the workflow is terminal (must complete)."""
    t0 = time.perf_counter()
    wf_id = client.submit(defn).id
    status = wait_terminal(client, wf_id)
    elapsed = time.perf_counter() - t0
    if status != "completed":
        raise RuntimeError(f"{defn.name} ended {status}")
    return elapsed


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start a dagq service process."""
    return subprocess.Popen([DAGQ, *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM and wait."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def synthetic(settings: Settings, n: int) -> tuple[float, int]:
    """Coordinator-only completions/s: workers are replaced by instant synthetic completions."""
    backend = backend_from_settings(settings)
    client = WorkflowClient(backend)
    coord = Coordinator(backend, settings, children=WorkflowClient(backend))
    wf_id = client.submit(fan(n)).id
    tasks = backend.queues.get("default")
    completions = backend.queues.get("completions")
    applied = 0
    elapsed = 0.0
    while client.row(wf_id).status not in TERMINAL_WORKFLOW_STATUSES:
        msgs = tasks.receive(256, 60)
        if msgs:
            items = []
            for m in msgs:
                t = decode_task(m.body)
                body = CompletionMessage(t.workflow_id, t.task, t.attempt, True).encode()
                items.append((body, 0.0, f"{t.key}/done"))
            completions.send_many(items)
            tasks.delete_many(msgs)
        t0 = time.perf_counter()
        handled = coord.step()
        while handled:
            applied += handled
            handled = coord.step()
        elapsed += time.perf_counter() - t0
    return elapsed, applied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", default=None, help="store URL (default: a temp SQLite file)")
    parser.add_argument("--connection-string", default=None,
                        help="DAGQ_STORAGE_CONNECTION_STRING for azure:// stores")
    parser.add_argument("--azurite", action="store_true",
                        help="start the project's Azurite and benchmark the Azure backend")
    parser.add_argument("--slots", type=int, default=2, help="worker slots")
    parser.add_argument("--fanout", type=int, default=1000)
    parser.add_argument("--chain", type=int, default=200)
    parser.add_argument("--layers", type=int, default=10)
    parser.add_argument("--width", type=int, default=20)
    parser.add_argument("--synthetic", type=int, default=3000,
                        help="tasks in the coordinator-only fan-out")
    parser.add_argument("--no-log-capture", action="store_true",
                        help="workers store neither task output nor attempt records "
                             "(DAGQ_LOG_CAPTURE=false), to measure what capture costs")
    parser.add_argument("--task-cmd", default="true",
                        help="the shell command of every task (e.g. 'echo hi' to store a log)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    CMD["cmd"] = args.task_cmd

    tmp = Path(tempfile.mkdtemp(prefix="dagq-bench-"))
    azurite = None
    if args.azurite:
        from tests.fixtures.azurite import _start, connection_string

        azurite, ports = _start(tmp)
        args.connection_string = connection_string(ports)
        args.store = f"azure://devstoreaccount1/bench{os.getpid()}"
    try:
        run(args, tmp)
    finally:
        if azurite is not None:
            from tests.fixtures.azurite import _stop

            _stop(azurite)


def run(args: argparse.Namespace, tmp: Path) -> None:
    """Run every scenario and print the figures."""
    store = args.store or f"sqlite:{tmp / 'bench.db'}"
    stats_file = tmp / "stats.jsonl"
    env = dict(os.environ, DAGQ_STORE=store, DAGQ_STATS_FILE=str(stats_file),
               DAGQ_IDLE_POLL="0.2", DAGQ_MAX_IDLE_BACKOFF="0.2",
               DAGQ_LOG_CAPTURE="false" if args.no_log_capture else "true")
    if args.connection_string:
        env["DAGQ_STORAGE_CONNECTION_STRING"] = args.connection_string
    os.environ.update({k: v for k, v in env.items() if k.startswith("DAGQ_")
                       and k != "DAGQ_STATS_FILE"})
    settings = Settings.from_env()
    client = WorkflowClient(backend_from_settings(settings))

    coord = start(["coordinator"], env)
    worker = start(["worker", "default", "--concurrency", str(args.slots)], env)
    time.sleep(1.0)
    results: dict[str, Any] = {"store": store.split(":")[0], "slots": args.slots,
                               "log_capture": not args.no_log_capture}
    tasks_run = 0
    try:
        timed(client, chain(5))  # warm-up
        tasks_run += 5
        secs = timed(client, fan(args.fanout))
        tasks_run += args.fanout + 2
        results["fanout_tasks_per_s"] = (args.fanout + 2) / secs
        secs = timed(client, chain(args.chain))
        tasks_run += args.chain
        results["chain_ms_per_hop"] = 1000 * secs / args.chain
        secs = timed(client, lattice(args.layers, args.width))
        tasks_run += args.layers * args.width
        results["lattice_tasks_per_s"] = args.layers * args.width / secs
    finally:
        stop(worker)
        stop(coord)
    records = [json.loads(line) for line in stats_file.read_text().splitlines()]
    requests = sum(sum(r["requests"].values()) for r in records)
    results["requests_per_task"] = requests / tasks_run
    results["requests_by_kind"] = {}
    for r in records:
        for kind, n in r["requests"].items():
            results["requests_by_kind"][kind] = results["requests_by_kind"].get(kind, 0) + n
    results["peak_rss_mb"] = {r["role"]: round(r["max_rss_kb"] / 1024, 1) for r in records}

    # a fresh store for the coordinator-only run
    os.environ["DAGQ_STORE"] = (f"{store}syn" if store.startswith("azure:")
                                else f"sqlite:{tmp / 'synthetic.db'}")
    secs, applied = synthetic(Settings.from_env(), args.synthetic)
    results["coordinator_completions_per_s"] = applied / secs
    results["peak_rss_mb"]["bench+synthetic coordinator"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)

    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"store: {results['store']}, worker slots: {args.slots}, "
          f"log capture: {'on' if results['log_capture'] else 'off'}")
    print(f"(a) fan-out 1+{args.fanout}+1:      {results['fanout_tasks_per_s']:8.0f} tasks/s")
    print(f"(b) chain of {args.chain}:            {results['chain_ms_per_hop']:8.1f} ms/hop")
    print(f"(c) lattice {args.layers}x{args.width}:          "
          f"{results['lattice_tasks_per_s']:8.0f} tasks/s")
    print(f"(d) coordinator only:        {results['coordinator_completions_per_s']:8.0f} "
          f"completions/s ({args.synthetic}-task fan-out)")
    print(f"(e) store requests per task: {results['requests_per_task']:8.1f}  "
          + ", ".join(f"{k}={v}" for k, v in sorted(results["requests_by_kind"].items())))
    print("(f) peak RSS MB:             "
          + ", ".join(f"{k}={v}" for k, v in results["peak_rss_mb"].items()))


if __name__ == "__main__":
    main()

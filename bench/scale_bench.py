"""Scale benchmark: how cost per task grows with the workflow, and many workflows at once.

    .venv/bin/python bench/scale_bench.py e2e --shape fanout --sizes 1000,10000,100000
    .venv/bin/python bench/scale_bench.py e2e --shape fanin --sizes 100000 --kind noop
    .venv/bin/python bench/scale_bench.py coordinator --sizes 1000,10000,100000
    .venv/bin/python bench/scale_bench.py many --workflows 1000 --tasks 100
    .venv/bin/python bench/scale_bench.py submit --sizes 100000 --files 10000
    add --azurite to any of them to run on the project's Azurite instead of SQLite

``e2e`` runs what a user runs: ``dagq submit FILE`` (timed), one ``dagq coordinator`` and
two ``dagq worker default --concurrency 2`` processes, fresh for every size, until the
workflow is terminal; it prints tasks/s, the coordinator's peak RSS, the state bytes it
wrote per completion and the store requests per task (every process). Shapes: ``fanout``
(1 -> N -> 1) and ``fanin`` (N roots -> 1). ``--kind shell`` tasks run ``true`` in a
subprocess; ``--kind noop`` tasks run nothing, so the figure is the engine's, not fork's.

``coordinator`` applies synthetic completions in process (no workers) and times only
``Coordinator.step``: microseconds per completion and state bytes per completion.
``many`` submits W workflows of T tasks with ``dagq submit --concurrency`` and runs them
at once; ``submit`` times ``dagq submit`` of one large file and of many small files.
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
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "shared"))
sys.path.insert(0, str(ROOT))

from dagq.client import WorkflowClient  # noqa: E402
from dagq.config import Settings  # noqa: E402
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES  # noqa: E402
from dagq.protocol.messages import CompletionMessage, decode_task  # noqa: E402
from dagq.runtime.coordinator import Coordinator  # noqa: E402
from dagq.wiring import backend_from_settings  # noqa: E402

DAGQ = str(Path(sys.executable).parent / "dagq")


def task(name: str, kind: str, deps: list[str] | None = None) -> dict[str, Any]:
    """One task of the benchmark's definitions."""
    t: dict[str, Any] = {"name": name}
    if kind == "noop":
        t["kind"] = "noop"
    else:
        t["kwargs"] = {"cmd": "true"}
    if deps:
        t["depends_on"] = deps
    return t


def definition(shape: str, n: int, kind: str, name: str = "") -> dict[str, Any]:
    """``fanout``: root -> n -> sink (n + 2 tasks); ``fanin``: n roots -> sink (n + 1)."""
    mids = [f"t{i}" for i in range(n)]
    if shape == "fanout":
        tasks = [task("root", kind), *(task(m, kind, ["root"]) for m in mids),
                 task("sink", kind, mids)]
    else:
        tasks = [*(task(m, kind) for m in mids), task("sink", kind, mids)]
    doc: dict[str, Any] = {"name": name or f"{shape}-{n}", "tasks": tasks}
    if PARALLELISM:
        doc["max_parallelism"] = PARALLELISM
    return doc


VERBOSE = False
"""``--verbose``: workers log at INFO (every claim decision), e.g. to trace a lost attempt."""

PARALLELISM = 0
"""``--max-parallelism``: cap running tasks per workflow (0: none). On Azurite it keeps
the task queue short: Azurite's receive scans the whole backlog."""


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc, separators=(",", ":")))
    return path


class Stack:
    """A store (SQLite file or Azurite prefix) with a coordinator and two workers."""

    def __init__(self, tmp: Path, store: str, extra: dict[str, str]) -> None:
        self.tmp = tmp
        self.stats = tmp / f"stats-{time.monotonic_ns()}.jsonl"
        self.env = dict(os.environ, DAGQ_STORE=store, DAGQ_STATS_FILE=str(self.stats),
                        DAGQ_IDLE_POLL="0.2", DAGQ_MAX_IDLE_BACKOFF="0.2",
                        DAGQ_LOG_CAPTURE="false", **extra)
        # dagq runs from compiled bytecode, as an installed package does (pip compiles it
        # at install); a shell that sets PYTHONDONTWRITEBYTECODE would time the compiler
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "dagq-bench-pyc")
        os.environ.update({k: v for k, v in self.env.items()
                           if k.startswith("DAGQ_") and k != "DAGQ_STATS_FILE"})
        self.client = WorkflowClient(backend_from_settings(Settings.from_env()))
        self.procs: list[tuple[str, subprocess.Popen[bytes], Path]] = []

    def start(self, workers: int = 2, slots: int = 2) -> None:
        self.procs.append(("coordinator", *self._spawn(["coordinator"])))
        for _ in range(workers):
            self.procs.append(("worker", *self._spawn(
                ["worker", "default", "--concurrency", str(slots)])))
        time.sleep(1.5)

    def _spawn(self, args: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.tmp / f"{args[0]}-{time.monotonic_ns()}.log"  # a file: a pipe would fill
        with log.open("wb") as err:
            verbose = ["-v"] if VERBOSE and args[0] == "worker" else []
            proc = subprocess.Popen([DAGQ, *verbose, *args], env=self.env,
                                    stdout=subprocess.DEVNULL, stderr=err,
                                    start_new_session=True)
        return proc, log

    def submit(self, paths: list[Path], concurrency: int = 20) -> tuple[float, list[str]]:
        """Seconds ``dagq submit`` took, and the ids it printed."""
        t0 = time.perf_counter()
        out = subprocess.run([DAGQ, "submit", "--concurrency", str(concurrency)],
                             input="\n".join(map(str, paths)), env=self.env,
                             capture_output=True, text=True, check=True)
        return time.perf_counter() - t0, out.stdout.split()

    def wait(self, ids: list[str], timeout: float = 7200) -> None:
        deadline = time.monotonic() + timeout
        left = set(ids)
        while left:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(left)} workflow(s) did not finish")
            if len(left) > 50:
                done = {w["id"] for w in self.client.list_workflows()
                        if w["status"] in TERMINAL_WORKFLOW_STATUSES}
            else:
                done = {i for i in left
                        if self.client.row(i).status in TERMINAL_WORKFLOW_STATUSES}
            left -= done
            time.sleep(0.05 if len(ids) == 1 else 0.5)

    def stop(self) -> dict[str, Any]:
        """Stop every process; the coordinator's summary and each role's peak RSS."""
        summary = ""
        for _, proc, _ in self.procs:
            proc.send_signal(signal.SIGTERM)
        for role, proc, log in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if role == "coordinator":
                summary = log.read_text(errors="replace").strip().splitlines()[-1]
        self.procs = []
        records = [json.loads(line) for line in self.stats.read_text().splitlines()]
        rss = {}
        for r in records:
            rss[r["role"]] = max(rss.get(r["role"], 0.0), round(r["max_rss_kb"] / 1024, 1))
        requests = sum(sum(r["requests"].values()) for r in records)
        counts = dict(p.split("=") for p in summary.split(": ", 1)[-1].split(", ") if "=" in p)
        return {"rss_mb": rss, "requests": requests, "coordinator": counts}


@contextmanager
def stack(tmp: Path, args: argparse.Namespace, tag: str) -> Iterator[Stack]:
    extra = {}
    if args.azurite:
        store = f"azure://devstoreaccount1/b{os.getpid()}{tag}"
        extra["DAGQ_STORAGE_CONNECTION_STRING"] = args.connection_string
    else:
        store = f"sqlite:{tmp / f'{tag}.db'}"
    s = Stack(tmp, store, extra)
    try:
        yield s
    finally:
        if s.procs:
            s.stop()


def e2e(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    rows = []
    for n in args.sizes:
        doc = definition(args.shape, n, args.kind)
        path = write(tmp / f"{args.shape}-{n}.json", doc)
        total = len(doc["tasks"])
        with stack(tmp, args, f"e{n}") as s:
            s.start()
            t0 = time.perf_counter()
            submit_s, ids = s.submit([path])
            s.wait(ids)
            elapsed = time.perf_counter() - t0
            figures = s.stop()
        c = figures["coordinator"]
        done = int(c.get("completions", 0)) or total
        rows.append({
            "shape": args.shape, "kind": args.kind, "tasks": total,
            "max_parallelism": PARALLELISM,
            "submit_s": round(submit_s, 2), "total_s": round(elapsed, 1),
            "tasks_per_s": round(total / elapsed, 1),
            "coordinator_rss_mb": figures["rss_mb"].get("coordinator"),
            "worker_rss_mb": figures["rss_mb"].get("worker"),
            "state_writes": int(c.get("writes", 0)),
            "state_bytes_per_completion": round(int(c.get("state_bytes", 0)) / done, 1),
            "requests_per_task": round(figures["requests"] / total, 2)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def coordinator(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    rows = []
    for n in args.sizes:
        with stack(tmp, args, f"c{n}"):
            settings = Settings.from_env()
            backend = backend_from_settings(settings)
            client = WorkflowClient(backend)
            from dagq.core.parse import definition_from_dict

            wf = client.submit(definition_from_dict(definition(args.shape, n, "shell"))).id
            coord = Coordinator(backend, settings, children=client)
            tasks, completions = backend.queues.get("default"), backend.queues.get("completions")
            applied, elapsed = 0, 0.0
            while client.row(wf).status not in TERMINAL_WORKFLOW_STATUSES:
                msgs = tasks.receive(256, 600)
                if msgs:
                    items = []
                    for m in msgs:
                        t = decode_task(m.body)
                        body = CompletionMessage(t.workflow_id, t.task, t.attempt, True).encode()
                        items.append((body, 0.0, f"{t.key}/done"))
                    completions.send_many(items)
                    tasks.delete_many(msgs)
                t0 = time.perf_counter()
                while handled := coord.step():
                    applied += handled
                elapsed += time.perf_counter() - t0
            c = coord.stats.counts
        rows.append({"shape": args.shape, "tasks": n, "completions": applied,
                     "max_parallelism": PARALLELISM,
                     "us_per_completion": round(elapsed / applied * 1e6, 1),
                     "completions_per_s": round(applied / elapsed),
                     "state_writes": c["writes"],
                     "state_bytes_per_completion": round(c["state_bytes"] / applied, 1)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def many(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    folder = tmp / "many"
    folder.mkdir(exist_ok=True)
    paths = [write(folder / f"w{i}.json", definition("fanout", args.tasks - 2, args.kind,
                                                     f"many-{i}"))
             for i in range(args.workflows)]
    with stack(tmp, args, "many") as s:
        s.start()
        t0 = time.perf_counter()
        submit_s, ids = s.submit(paths, args.concurrency)
        s.wait(ids)
        elapsed = time.perf_counter() - t0
        figures = s.stop()
    total = args.workflows * args.tasks
    row = {"workflows": args.workflows, "tasks_each": args.tasks, "kind": args.kind,
           "submit_s": round(submit_s, 1), "total_s": round(elapsed, 1),
           "tasks_per_s": round(total / elapsed, 1),
           "coordinator_rss_mb": figures["rss_mb"].get("coordinator"),
           "requests_per_task": round(figures["requests"] / total, 2)}
    print(json.dumps(row), flush=True)
    return [row]


def submit(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    rows = []
    for n in args.sizes:
        for shape in ("fanout", "fanin"):
            doc = definition(shape, n, args.kind)
            path = write(tmp / f"submit-{shape}-{n}.json", doc)
            with stack(tmp, args, f"s{shape}{n}") as s:  # the VM's speed drifts: take several
                times = sorted(s.submit([path])[0] for _ in range(args.repeat))
            rows.append({"what": f"one {shape} file of {len(doc['tasks'])} tasks",
                         "median_s": round(statistics.median(times), 2),
                         "min_s": round(times[0], 2), "max_s": round(times[-1], 2),
                         "runs": len(times)})
            print(json.dumps(rows[-1]), flush=True)
    folder = tmp / "files"
    folder.mkdir(exist_ok=True)
    paths = [write(folder / f"f{i}.json", definition("fanout", 3, args.kind, f"file-{i}"))
             for i in range(args.files)]
    for conc in (1, args.concurrency):
        with stack(tmp, args, f"files{conc}") as s:
            secs, ids = s.submit(paths, conc)
        rows.append({"what": f"{args.files} files of 5 tasks, --concurrency {conc}",
                     "seconds": round(secs, 1), "files_per_s": round(len(ids) / secs, 1)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["e2e", "coordinator", "many", "submit"])
    parser.add_argument("--shape", choices=["fanout", "fanin"], default="fanout")
    parser.add_argument("--sizes", default="1000,10000,100000",
                        type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--kind", choices=["shell", "noop"], default="shell")
    parser.add_argument("--workflows", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--files", type=int, default=10000)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5,
                        help="submit: times each large file is submitted (median reported)")
    parser.add_argument("--azurite", action="store_true")
    parser.add_argument("--max-parallelism", type=int, default=0)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    global PARALLELISM, VERBOSE
    PARALLELISM, VERBOSE = args.max_parallelism, args.verbose
    tmp = Path(tempfile.mkdtemp(prefix="dagq-scale-"))
    azurite = None
    if args.azurite:
        from tests.fixtures.azurite import _start, _stop, connection_string

        azurite, ports = _start(tmp)
        args.connection_string = connection_string(ports)
    try:
        rows = {"e2e": e2e, "coordinator": coordinator, "many": many, "submit": submit}[
            args.what](args, tmp)
        print(json.dumps({"date": time.strftime("%Y-%m-%d"), "results": rows}, indent=1))
    finally:
        if azurite is not None:
            _stop(azurite)


if __name__ == "__main__":
    main()

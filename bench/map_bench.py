"""Mapped tasks against a static fan-out of the same width, end to end.

    .venv/bin/python bench/map_bench.py                          # 100,000 items
    .venv/bin/python bench/map_bench.py --items 10000 --rounds 2
    .venv/bin/python bench/map_bench.py --items 10000 --coordinator --profile

Two workflows of the same width N, each run on a fresh embedded SQLite store by one
``dagq coordinator`` and ``--workers`` ``dagq worker default --concurrency --slots``
processes (as ``scale_bench.py e2e`` starts them), timed from ``dagq submit`` until the
workflow is terminal:

* ``static``: the fan-out ``root -> t0 .. t{N-1} -> sink`` written out, N + 2 tasks in
  the submitted definition, every task ``true``;
* ``map``: ``scan -> fit -> reduce`` with ``fit`` mapped over the N items ``scan``
  publishes (``map: {over: inputs.scan.items}``), 3 tasks in the definition and N
  instances ``fit[0] .. fit[N-1]`` made at run time, each running ``true {item}`` (so
  the item is rendered into every command; ``--map-cmd true`` leaves it out); ``scan``
  is one Python process writing the list, ``reduce`` is ``true``.

For each: tasks/s (the N + 2 tasks that run on a worker), microseconds per instance (wall
time / N), the stored state at the end (``states.read``: the last snapshot plus the
journal deltas after it) and the size of a snapshot of it (``encode_state``), the state
bytes the coordinator wrote in all, and the ratio map / static of the cost per
instance. ``--rounds R`` alternates static and map R times, ``--order map,static`` runs the map
first (the machine's speed drifts; the medians are compared).

``--coordinator`` runs no worker: an in-process ``Coordinator`` applies synthetic
completions (the worker's own ``completion()`` stores ``scan``'s list as a worker
would) and only ``Coordinator.step`` is timed, as ``scale_bench.py coordinator`` does;
``--profile`` runs that under cProfile and prints the functions with the largest
cumulative and own time of each shape.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "shared"))
sys.path.insert(0, str(ROOT / "bench"))

from scale_bench import Stack, write  # noqa: E402
from scale_bench import definition as static_definition  # noqa: E402

from dagq.client import WorkflowClient  # noqa: E402
from dagq.config import Settings  # noqa: E402
from dagq.core.engine import loads  # noqa: E402
from dagq.core.engine.codec import encode_state  # noqa: E402
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES  # noqa: E402
from dagq.core.parse import definition_from_dict  # noqa: E402
from dagq.protocol.messages import CompletionMessage, decode_task  # noqa: E402
from dagq.runtime.coordinator import Coordinator  # noqa: E402
from dagq.wiring import backend_from_settings  # noqa: E402
from dagq.worker.publish import completion  # noqa: E402

SCAN = ("import json, os; json.dump({{'items': list(range({n}))}}, "
        "open(os.environ['DAGQ_OUTPUT_FILE'], 'w'))")


MAP_CMD = "true {item}"
"""``--map-cmd``: what each instance runs (``true`` leaves the item out of the command)."""


def map_definition(n: int) -> dict[str, Any]:
    """``scan`` (publishes ``{"items": [0 .. n-1]}``) -> ``fit`` mapped over them ->
    ``reduce``."""
    scan = shlex.join([sys.executable, "-c", SCAN.format(n=n)])
    return {"name": f"map-{n}", "tasks": [
        {"name": "scan", "kwargs": {"cmd": scan}},
        {"name": "fit", "depends_on": ["scan"],
         "map": {"over": "inputs.scan.items", "max_items": max(n, 1)},
         "kwargs": {"cmd": MAP_CMD}},
        {"name": "reduce", "depends_on": ["fit"], "kwargs": {"cmd": "true"}},
    ]}


def definitions(n: int) -> dict[str, dict[str, Any]]:
    return {"static": static_definition("fanout", n, "shell", f"static-{n}"),
            "map": map_definition(n)}


def stored_state_bytes(store: str, wf_id: str) -> tuple[int, int]:
    """Size of the workflow's stored state now (the last snapshot and the journal deltas
    after it, which depends on where the last compaction fell), and of a snapshot of it
    (``encode_state``: what the state itself weighs)."""
    backend = backend_from_settings(replace(Settings.from_env(), store=store))
    data, _ = backend.states.read(wf_id)
    return len(data), len(encode_state(loads(data)))


def e2e_once(kind: str, doc: dict[str, Any], n: int, tmp: Path, args: argparse.Namespace,
             tag: str) -> dict[str, Any]:
    path = write(tmp / f"{tag}.json", doc)
    store = f"sqlite:{tmp / f'{tag}.db'}"
    s = Stack(tmp, store, {})
    try:
        s.start(args.workers, args.slots)
        t0 = time.perf_counter()
        submit_s, ids = s.submit([path])
        s.wait(ids)
        elapsed = time.perf_counter() - t0
        status = s.client.row(ids[0]).status
        state_end, snapshot = stored_state_bytes(store, ids[0])
        figures = s.stop()
    finally:
        if s.procs:
            s.stop()
    c = figures["coordinator"]
    ran = n + 2  # root/scan, the n middle tasks or instances, sink/reduce
    return {"kind": kind, "items": n, "status": status, "submit_s": round(submit_s, 2),
            "total_s": round(elapsed, 1), "tasks_per_s": round(ran / elapsed, 1),
            "us_per_instance": round(elapsed / max(n, 1) * 1e6, 1),
            "state_bytes_end": state_end, "state_snapshot_bytes": snapshot,
            "state_bytes_written": int(c.get("state_bytes", 0)),
            "state_writes": int(c.get("writes", 0)),
            "coordinator_rss_mb": figures["rss_mb"].get("coordinator"),
            "requests_per_task": round(figures["requests"] / ran, 2)}


def e2e(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    n = args.items
    docs = definitions(n)
    rows: dict[str, list[dict[str, Any]]] = {"static": [], "map": []}
    for r in range(args.rounds):
        for kind in args.order:
            row = e2e_once(kind, docs[kind], n, tmp, args, f"{kind}-{n}-{r}")
            rows[kind].append(row)
            print(json.dumps(row), flush=True)
    med = {k: statistics.median(x["us_per_instance"] for x in v) for k, v in rows.items()}
    return {"items": n, "workers": args.workers, "slots": args.slots, "rounds": args.rounds,
            "median_us_per_instance": med,
            "median_tasks_per_s": {k: statistics.median(x["tasks_per_s"] for x in v)
                                   for k, v in rows.items()},
            "ratio_map_over_static": round(med["map"] / med["static"], 3),
            "runs": rows}


def coordinator_once(kind: str, doc: dict[str, Any], n: int, tmp: Path,
                     profile: bool) -> dict[str, Any]:
    """Apply synthetic completions in process; time only ``Coordinator.step``."""
    store = f"sqlite:{tmp / f'c-{kind}-{n}.db'}"
    Stack(tmp, store, {})  # sets the DAGQ_ environment of this process to that store
    settings = Settings.from_env()
    backend = backend_from_settings(settings)
    client = WorkflowClient(backend)
    t_submit = time.perf_counter()
    wf = client.submit(definition_from_dict(doc)).id
    submit_s = time.perf_counter() - t_submit
    coord = Coordinator(backend, settings, children=client)
    tasks, completions = backend.queues.get("default"), backend.queues.get("completions")
    limit = completions.max_message_bytes
    out = tmp / "scan-output.json"
    out.write_text(json.dumps({"items": list(range(n))}))
    prof = cProfile.Profile() if profile else None
    applied, elapsed = 0, 0.0
    while client.row(wf).status not in TERMINAL_WORKFLOW_STATUSES:
        msgs = tasks.receive(256, 600)
        if msgs:
            items = []
            for m in msgs:
                t = decode_task(m.body)
                if t.task == "scan":
                    _, body = completion(backend, t, True, None, out, "bench", limit)
                else:
                    body = CompletionMessage(t.workflow_id, t.task, t.attempt, True).encode()
                items.append((body, 0.0, f"{t.key}/done"))
            completions.send_many(items)
            tasks.delete_many(msgs)
        t0 = time.perf_counter()
        if prof is not None:
            prof.enable()
        while handled := coord.step():
            applied += handled
        if prof is not None:
            prof.disable()
        elapsed += time.perf_counter() - t0
    c = coord.stats.counts
    _, snapshot = stored_state_bytes(store, wf)
    data, _ = backend.states.read(wf)
    row = {"kind": kind, "items": n, "status": client.row(wf).status,
           "submit_s": round(submit_s, 2), "completions": applied,
           "step_s": round(elapsed, 2),
           "us_per_instance": round(elapsed / max(n, 1) * 1e6, 1),
           "state_bytes_end": len(data), "state_snapshot_bytes": snapshot,
           "state_bytes_written": c["state_bytes"],
           "state_writes": c["writes"]}
    if prof is not None:
        for order in ("cumulative", "tottime"):
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats(order).print_stats(25)
            row[f"profile_{order}"] = text.getvalue()
    return row


def coordinator(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    n = args.items
    docs = definitions(n)
    rows: dict[str, list[dict[str, Any]]] = {"static": [], "map": []}
    for _ in range(args.rounds):
        for kind in args.order:
            row = coordinator_once(kind, docs[kind], n, tmp, args.profile)
            rows[kind].append(row)
            shown = {k: v for k, v in row.items() if not k.startswith("profile_")}
            print(json.dumps(shown), flush=True)
            for key in ("profile_cumulative", "profile_tottime"):
                if key in row:
                    print(f"--- {kind}: {key}\n{row.pop(key)}", flush=True)
    med = {k: statistics.median(x["us_per_instance"] for x in v) for k, v in rows.items()}
    return {"items": n, "mode": "coordinator", "median_us_per_instance": med,
            "ratio_map_over_static": round(med["map"] / med["static"], 3), "runs": rows}


def main() -> None:
    global MAP_CMD
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100_000,
                        help="width N of both workflows (default 100000)")
    parser.add_argument("--workers", type=int, default=2,
                        help="dagq worker processes (default 2, as scale_bench.py)")
    parser.add_argument("--slots", type=int, default=2,
                        help="--concurrency of each worker (default 2)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="alternate static and map this many times")
    parser.add_argument("--order", default="static,map", choices=["static,map", "map,static"],
                        help="which of the two runs first in each round")
    parser.add_argument("--map-cmd", default=MAP_CMD,
                        help="the command of each instance (default: 'true {item}')")
    parser.add_argument("--coordinator", action="store_true",
                        help="synthetic completions in process, no workers")
    parser.add_argument("--profile", action="store_true",
                        help="with --coordinator: cProfile Coordinator.step")
    args = parser.parse_args()
    MAP_CMD = args.map_cmd
    args.order = args.order.split(",")
    tmp = Path(tempfile.mkdtemp(prefix="dagq-map-bench-"))
    result = (coordinator if args.coordinator else e2e)(args, tmp)
    print(json.dumps({"date": time.strftime("%Y-%m-%d"), **result}, indent=1))


if __name__ == "__main__":
    main()

"""Reading many upstream outputs from inside one task: ``get_upstream_output`` in a loop.

    .venv/bin/python bench/upstream_bench.py [--n 5000] [--max-fan-in 100]

A workflow of N root tasks and one sink is driven by a coordinator with instant
synthetic completions (each root publishes ``{"i": i}``) on the embedded SQLite store.
When the sink is dispatched, its inputs file is written as a worker writes it and the
sink's own process (a fresh Python, as a task script is) calls
``get_upstream_output(name)`` for every root, timing the loop. Two cases: the sink
depends on the roots directly, and behind merge nodes (``--max-fan-in``), where the
real upstream outputs are read from the workflow state.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dagq.client import WorkflowClient, fetch_verified  # noqa: E402
from dagq.config import Settings  # noqa: E402
from dagq.core.model import TaskDef, WorkflowDef  # noqa: E402
from dagq.protocol.messages import CompletionMessage, decode_task, ref_from_json  # noqa: E402
from dagq.runtime.coordinator import Coordinator  # noqa: E402
from dagq.wiring import backend_from_settings  # noqa: E402

READER = textwrap.dedent("""\
    import json, sys, time
    from dagq.task import get_upstream_output
    names = json.loads(sys.argv[1])
    t0 = time.perf_counter()
    values = [get_upstream_output(n) for n in names]
    elapsed = time.perf_counter() - t0
    assert values == [{"i": i} for i in range(len(names))], values[:3]
    print(elapsed)
    """)


def drive_to_sink(store: str, n: int, max_fan_in: int | None) -> tuple[str, dict[str, object]]:
    """Submit the workflow and complete every root; the sink's id and direct inputs."""
    settings = Settings.from_env({"DAGQ_STORE": store})
    backend = backend_from_settings(settings)
    roots = tuple(TaskDef(f"r{i}", {"cmd": "true"}) for i in range(n))
    sink = TaskDef("sink", {"cmd": "true"}, tuple(t.name for t in roots))
    wf_id = WorkflowClient(backend).submit(WorkflowDef("bench-upstream", (*roots, sink)),
                                           max_fan_in=max_fan_in).id
    coord = Coordinator(backend, settings)
    tasks, completions = backend.queues.get("default"), backend.queues.get("completions")
    try:
        while True:
            coord.step()
            msgs = tasks.receive(256, 60)
            items = []
            for m in msgs:
                t = decode_task(m.body)
                if t.task == "sink":
                    raw = t.inputs
                    if t.inputs_ref is not None:
                        raw = json.loads(fetch_verified(backend, t.inputs_ref))
                    inputs = {k: json.loads(fetch_verified(backend, r)) if (
                        r := ref_from_json(v)) else v for k, v in raw.items()}
                    return wf_id, inputs
                body = CompletionMessage(t.workflow_id, t.task, t.attempt, True,
                                         output={"i": int(t.task[1:])}).encode()
                items.append((body, 0.0, f"{t.key}/done"))
            completions.send_many(items)
            tasks.delete_many(msgs)
    finally:
        coord.close()
        backend.close()


def read_all(store: str, wf_id: str, inputs: dict[str, object], n: int, tmp: Path) -> float:
    """Seconds the sink's process spends reading all ``n`` upstream outputs."""
    inputs_file = tmp / f"inputs-{wf_id}.json"
    inputs_file.write_text(json.dumps(inputs))
    env = dict(os.environ, DAGQ_STORE=store, DAGQ_WORKFLOW_ID=wf_id, DAGQ_TASK="sink",
               DAGQ_INPUTS_FILE=str(inputs_file), PYTHONPATH=str(ROOT / "shared"))
    names = json.dumps([f"r{i}" for i in range(n)])
    out = subprocess.run([sys.executable, "-c", READER, names], env=env, check=True,
                         capture_output=True, text=True)
    return float(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=5000, help="upstream tasks")
    parser.add_argument("--max-fan-in", type=int, default=100, help="for the merge-node case")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dagq-upstream-"))
    for label, fan_in in (("direct", None), (f"behind merge nodes (max fan-in "
                                             f"{args.max_fan_in})", args.max_fan_in)):
        store = f"sqlite:{tmp / f'{fan_in}.db'}"
        wf_id, inputs = drive_to_sink(store, args.n, fan_in)
        secs = read_all(store, wf_id, inputs, args.n, tmp)
        print(f"{args.n} upstream outputs, {label}: {secs:.3f} s "
              f"({secs / args.n * 1e6:.0f} us per output)")


if __name__ == "__main__":
    main()

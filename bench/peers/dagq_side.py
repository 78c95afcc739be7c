"""dagq's runner: a ``dagq coordinator`` and a ``dagq worker default --processes SLOTS``
(``--layout threads``: ``--concurrency SLOTS`` in one process) on a fresh embedded SQLite
store, started once, then the shared warm-up and repetitions.

Runs under the project's virtualenv and takes its workflows and timing from
``bench/runtime_bench.py`` (a workflow is timed from submission until its index row is
terminal; every task is ``cmd: true``). It imports no peer library.

    .venv/bin/python bench/peers/dagq_side.py --out dagq.json
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import runtime_bench  # noqa: E402
from harness import (  # noqa: E402
    Sizes,
    check_alive,
    measure,
    runner_arguments,
    sizes_from,
    start_worker,
    stop_worker,
    write_result,
)

from dagq import __version__ as dagq_version  # noqa: E402
from dagq.client import WorkflowClient  # noqa: E402
from dagq.config import Settings  # noqa: E402
from dagq.core.model import WorkflowDef  # noqa: E402
from dagq.wiring import backend_from_settings  # noqa: E402


def definition(shape: str, sizes: Sizes) -> WorkflowDef:
    """The dagq workflow of ``shape`` (built by runtime_bench, so both benches agree)."""
    if shape == "fanout":
        return runtime_bench.fan(sizes.width)
    if shape == "chain":
        return runtime_bench.chain(sizes.chain)
    if shape == "lattice":
        return runtime_bench.lattice(sizes.layers, sizes.layer_width)
    raise ValueError(f"unknown shape {shape!r}")


def main() -> None:
    """Start the coordinator and the worker, measure, write the result, stop them."""
    parser = runner_arguments(__doc__)
    parser.add_argument("--layout", choices=("threads", "processes"), default="processes",
                        help="processes: SLOTS processes x 1 slot; threads: 1 x SLOTS")
    args = parser.parse_args()
    sizes = sizes_from(args)
    logs = args.logs or Path(tempfile.mkdtemp(prefix="dagq-peer-bench-"))
    logs.mkdir(parents=True, exist_ok=True)
    store_dir = Path(tempfile.mkdtemp(prefix="dagq-peer-store-"))
    # the settings runtime_bench.py runs with
    dagq_env = {"DAGQ_STORE": f"sqlite:{store_dir / 'bench.db'}", "DAGQ_IDLE_POLL": "0.2",
                "DAGQ_MAX_IDLE_BACKOFF": "0.2", "DAGQ_LOG_CAPTURE": "true"}
    os.environ.update(dagq_env)
    env = dict(os.environ)
    client = WorkflowClient(backend_from_settings(Settings.from_env()))

    coord_log, worker_log = logs / "dagq-coordinator.log", logs / "dagq-worker.log"
    worker_cmd = (["worker", "default", "--concurrency", str(args.slots)]
                  if args.layout == "threads" else
                  ["worker", "default", "--processes", str(args.slots), "--concurrency", "1"])
    coord = start_worker([runtime_bench.DAGQ, "coordinator"], coord_log, env=env)
    worker = start_worker([runtime_bench.DAGQ, *worker_cmd], worker_log, env=env)
    time.sleep(1.0)  # as runtime_bench.py; the warm-up absorbs the rest of the start

    def run_shape(shape: str, shape_sizes: Sizes) -> float:
        check_alive(coord, coord_log)
        check_alive(worker, worker_log)
        return float(runtime_bench.timed(client, definition(shape, shape_sizes)))

    try:
        figures = measure("dagq", run_shape, sizes, args.reps)
    finally:
        stop_worker(worker)
        stop_worker(coord)
        shutil.rmtree(store_dir, ignore_errors=True)
    write_result(args.out, "dagq", {"dagq": dagq_version}, "dagq " + " ".join(worker_cmd)
                 + " + dagq coordinator (embedded SQLite store)", sizes, figures)


if __name__ == "__main__":
    main()

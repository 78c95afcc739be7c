"""dramatiq's runner: the shapes as dramatiq-workflow ``Chain``/``Group`` primitives, a
``dramatiq`` worker with two slots and the Redis broker (database 2), which also holds
the workflow barriers (``WorkflowMiddleware`` over dramatiq's Redis rate-limiter backend,
callbacks stored inline in the messages, the library's defaults).

- fan-out: ``Chain(root, Group(N tasks), sink)``;
- chain: ``Chain(task, ..., task)``;
- lattice: ``Chain(Group(layer 0), ..., Group(last layer))``.

Every task runs ``subprocess.run(["true"], check=True)``. dramatiq keeps no results here,
so the last task of a shape (the sink, the chain's last hop, each task of the last layer)
also pushes one item onto a Redis list once its ``true`` has run; a workflow is timed
from ``Workflow.run()`` until the driver has popped all of them. ``--layout`` chooses
between one worker process with SLOTS threads and SLOTS processes of one thread. Runs
under the peers' virtualenv, where this module is also the worker's module
(``dramatiq dramatiq_side``); it imports no dagq.

    PEER_BENCH_REDIS_URL=redis://127.0.0.1:PORT bench/peers/.venv/bin/python \\
        bench/peers/dramatiq_side.py --out dramatiq.json
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import uuid
from importlib.metadata import version
from pathlib import Path
from typing import Any

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.rate_limits.backends import RedisBackend
from dramatiq_workflow import Chain, Group, Workflow, WorkflowMiddleware
from harness import (
    SHAPE_TIMEOUT_S,
    Sizes,
    check_alive,
    measure,
    redis_url,
    runner_arguments,
    sizes_from,
    start_worker,
    stop_worker,
    write_result,
)

HERE = Path(__file__).resolve().parent

broker = RedisBroker(url=redis_url(2))  # type: ignore[no-untyped-call]
broker.add_middleware(WorkflowMiddleware(RedisBackend(client=broker.client)))
dramatiq.set_broker(broker)


def _run_true() -> None:
    """The task body: the shell command ``true`` as a subprocess."""
    subprocess.run(["true"], check=True)


def _finish(done_key: str) -> None:
    """The body of a shape's last task(s): ``true``, then tell the driver it is done."""
    subprocess.run(["true"], check=True)
    broker.client.rpush(done_key, 1)


run_true = dramatiq.actor(actor_name="peer_bench_true", max_retries=0)(_run_true)
finish = dramatiq.actor(actor_name="peer_bench_finish", max_retries=0)(_finish)


def workflow(shape: str, sizes: Sizes, done_key: str) -> tuple[Any, int]:
    """The dramatiq-workflow of ``shape`` and how many done-items its last tasks push."""
    if shape == "fanout":
        mids = Group(*[run_true.message() for _ in range(sizes.width)])
        return Chain(run_true.message(), mids, finish.message(done_key)), 1
    if shape == "chain":
        hops = [run_true.message() for _ in range(sizes.chain - 1)]
        return Chain(*hops, finish.message(done_key)), 1
    if shape == "lattice":
        layers = [Group(*[run_true.message() for _ in range(sizes.layer_width)])
                  for _ in range(sizes.layers - 1)]
        last = Group(*[finish.message(done_key) for _ in range(sizes.layer_width)])
        return Chain(*layers, last), sizes.layer_width
    raise ValueError(f"unknown shape {shape!r}")


def main() -> None:
    """Start the worker, measure, write the result, stop the worker."""
    parser = runner_arguments(__doc__)
    parser.add_argument("--layout", choices=("threads", "processes"), default="processes",
                        help="threads: 1 process x SLOTS threads; processes: SLOTS x 1")
    args = parser.parse_args()
    sizes = sizes_from(args)
    logs = args.logs or Path(tempfile.mkdtemp(prefix="dramatiq-peer-bench-"))
    logs.mkdir(parents=True, exist_ok=True)
    worker_log = logs / "dramatiq-worker.log"
    processes, threads = (1, args.slots) if args.layout == "threads" else (args.slots, 1)
    worker_args = ["--processes", str(processes), "--threads", str(threads)]
    worker = start_worker([sys.executable, "-m", "dramatiq", "dramatiq_side", *worker_args,
                           "--path", str(HERE)], worker_log, cwd=HERE)

    def run_shape(shape: str, shape_sizes: Sizes) -> float:
        done_key = f"peer-bench-done-{uuid.uuid4().hex}"
        flow, expected = workflow(shape, shape_sizes, done_key)
        t0 = time.perf_counter()
        Workflow(flow, broker=broker).run()
        deadline = t0 + SHAPE_TIMEOUT_S
        while expected:
            if broker.client.blpop([done_key], timeout=1) is not None:
                expected -= 1
                continue
            check_alive(worker, worker_log)
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{shape} not done after {SHAPE_TIMEOUT_S:.0f}s")
        return time.perf_counter() - t0

    try:
        figures = measure("dramatiq", run_shape, sizes, args.reps)
    finally:
        stop_worker(worker)
    versions = {name: version(name) for name in ("dramatiq", "dramatiq-workflow", "redis")}
    write_result(args.out, "dramatiq", versions, "dramatiq " + " ".join(worker_args),
                 sizes, figures)


if __name__ == "__main__":
    main()

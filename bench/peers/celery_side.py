"""Celery's runner: the shapes as canvas primitives, a prefork worker with two slots, the
Redis broker (database 0) and the Redis result backend (database 1).

- fan-out: ``chain(root, chord(group(N tasks), sink))``;
- chain: ``chain(task, ..., task)``;
- lattice: nested chords, ``chord(group(layer 0), chord(group(layer 1), ... group(last)))``:
  each layer's group is the header of a chord whose body is the rest, so every task of a
  layer waits for every task of the layer before (a plain ``chain`` of groups does not
  keep that order).

Every task runs ``subprocess.run(["true"], check=True)`` and its signature is immutable
(no result is passed on). A workflow is timed from ``apply_async`` until the result of
its last task (or of every task of the last group, polled every 5 ms) is available.
Runs under the peers' virtualenv, where this module is also the worker's app
(``celery -A celery_side worker``); it imports no dagq.

    PEER_BENCH_REDIS_URL=redis://127.0.0.1:PORT bench/peers/.venv/bin/python \\
        bench/peers/celery_side.py --out celery.json
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from celery import Celery, chain, chord, group
from celery.exceptions import TimeoutError as CeleryTimeout
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
RESULT_POLL_S = 0.005
"""How often a group's result is polled (Celery's default, 0.5 s, would dominate the
lattice; a single task's result arrives by Redis pub/sub). dagq's bench polls every 5 ms."""

app = Celery("peer_bench")
app.conf.update(
    broker_url=redis_url(0),
    result_backend=redis_url(1),
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)


def _run_true() -> None:
    """The task body: the shell command ``true`` as a subprocess."""
    subprocess.run(["true"], check=True)


run_true: Any = app.task(name="peer_bench.true")(_run_true)
"""The only task; every node of every shape is an immutable signature of it."""


def canvas(shape: str, sizes: Sizes) -> Any:
    """The Celery canvas of ``shape``."""
    if shape == "fanout":
        mids = group([run_true.si() for _ in range(sizes.width)])
        return chain(run_true.si(), chord(mids, run_true.si()))
    if shape == "chain":
        return chain(*[run_true.si() for _ in range(sizes.chain)])
    if shape == "lattice":
        sig: Any = group([run_true.si() for _ in range(sizes.layer_width)])
        for _ in range(sizes.layers - 1):
            sig = chord(group([run_true.si() for _ in range(sizes.layer_width)]), sig)
        return sig
    raise ValueError(f"unknown shape {shape!r}")


def main() -> None:
    """Start the worker, measure, write the result, stop the worker."""
    args = runner_arguments(__doc__).parse_args()
    sizes = sizes_from(args)
    logs = args.logs or Path(tempfile.mkdtemp(prefix="celery-peer-bench-"))
    logs.mkdir(parents=True, exist_ok=True)
    worker_log = logs / "celery-worker.log"
    worker_args = ["--pool", "prefork", "--concurrency", str(args.slots), "-O", "fair",
                   "--prefetch-multiplier", "1", "--without-gossip", "--without-mingle",
                   "--without-heartbeat", "--loglevel", "WARNING"]
    worker = start_worker([sys.executable, "-m", "celery", "-A", "celery_side", "worker",
                           *worker_args], worker_log, cwd=HERE)

    def run_shape(shape: str, shape_sizes: Sizes) -> float:
        sig = canvas(shape, shape_sizes)
        t0 = time.perf_counter()
        result = sig.apply_async()
        deadline = t0 + SHAPE_TIMEOUT_S
        while True:
            try:
                result.get(timeout=1.0, interval=RESULT_POLL_S)
                break
            except CeleryTimeout:
                check_alive(worker, worker_log)
                if time.perf_counter() > deadline:
                    raise
        return time.perf_counter() - t0

    try:
        figures = measure("celery", run_shape, sizes, args.reps)
    finally:
        stop_worker(worker)
    versions = {name: version(name) for name in ("celery", "kombu", "billiard", "redis")}
    write_result(args.out, "celery", versions, "celery worker " + " ".join(worker_args)
                 + " (task_acks_late)", sizes, figures)


if __name__ == "__main__":
    main()

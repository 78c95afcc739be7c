"""What every system's runner shares: the shapes and their sizes, the figures computed from
a timing, the measuring loop (warm-up, then rounds of repetitions), the runner's command
line and its JSON result file, and starting and stopping a worker process.

Standard library only: it is imported both under the project's virtualenv (dagq) and under
the peers' virtualenv (Celery, dramatiq), and imports neither side's engine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

SHAPES = ("fanout", "chain", "lattice")
"""The three workflow shapes, in the order each round runs them."""

UNITS = {"fanout": "tasks/s", "chain": "ms/hop", "lattice": "tasks/s"}
"""The unit of each shape's figure."""

HIGHER_IS_BETTER = {"fanout": True, "chain": False, "lattice": True}
"""Whether a larger figure is a better one (throughput) or a worse one (latency)."""

REDIS_URL_ENV = "PEER_BENCH_REDIS_URL"
"""The environment variable that gives the peer runners and their workers the Redis URL
(``redis://127.0.0.1:PORT``); each system picks its own database numbers under it."""

SHAPE_TIMEOUT_S = 900.0
"""How long one workflow may take before the run is declared stuck."""


@dataclass(frozen=True)
class Sizes:
    """How large each shape is: fan-out 1 -> ``width`` -> 1, a chain of ``chain`` tasks,
    a lattice of ``layers`` x ``layer_width`` with every task of a layer depending on
    every task of the layer before."""

    width: int = 1000
    chain: int = 200
    layers: int = 10
    layer_width: int = 20

    def tasks(self, shape: str) -> int:
        """The number of tasks in one run of ``shape``."""
        if shape == "fanout":
            return self.width + 2
        if shape == "chain":
            return self.chain
        if shape == "lattice":
            return self.layers * self.layer_width
        raise ValueError(f"unknown shape {shape!r}")

    def figure(self, shape: str, seconds: float) -> float:
        """The shape's figure from the seconds one run took: tasks/s, or ms per hop for
        the chain."""
        if shape == "chain":
            return 1000.0 * seconds / self.chain
        return self.tasks(shape) / seconds

    def warmup(self) -> Sizes:
        """Small versions of the shapes, run once before measuring."""
        return Sizes(width=min(self.width, 50), chain=min(self.chain, 10),
                     layers=min(self.layers, 3), layer_width=min(self.layer_width, 5))

    def describe(self, shape: str) -> str:
        """A human label such as ``fan-out 1 -> 1000 -> 1``."""
        if shape == "fanout":
            return f"fan-out 1 → {self.width:,} → 1"
        if shape == "chain":
            return f"chain of {self.chain:,}"
        return f"lattice {self.layers} × {self.layer_width}"


RunShape = Callable[[str, Sizes], float]
"""Runs one workflow of a shape at the given sizes to completion; returns its seconds
(from submission until the last task is known done) or raises if it did not complete."""


def log(message: str) -> None:
    """Progress on stderr (stdout is left alone)."""
    print(message, file=sys.stderr, flush=True)


def measure(system: str, run_shape: RunShape, sizes: Sizes, reps: int) -> dict[str, list[float]]:
    """One warm-up run of each shape at small sizes, then ``reps`` rounds of the three
    shapes at full size; returns each shape's figures, one per round."""
    small = sizes.warmup()
    for shape in SHAPES:
        run_shape(shape, small)
    log(f"{system}: warmed up")
    figures: dict[str, list[float]] = {shape: [] for shape in SHAPES}
    for rep in range(reps):
        for shape in SHAPES:
            value = sizes.figure(shape, run_shape(shape, sizes))
            figures[shape].append(value)
            log(f"{system}: rep {rep + 1}/{reps} {sizes.describe(shape)}: "
                f"{value:,.1f} {UNITS[shape]}")
    return figures


def runner_arguments(description: str | None) -> argparse.ArgumentParser:
    """The command line every runner takes (the orchestrator passes the same values)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--width", type=int, default=Sizes.width)
    parser.add_argument("--chain", type=int, default=Sizes.chain)
    parser.add_argument("--layers", type=int, default=Sizes.layers)
    parser.add_argument("--layer-width", type=int, default=Sizes.layer_width)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--slots", type=int, default=2, help="worker slots")
    parser.add_argument("--logs", type=Path, default=None,
                        help="folder for the worker logs (default: a temporary one)")
    parser.add_argument("--out", type=Path, required=True, help="the JSON result file")
    return parser


def sizes_from(args: argparse.Namespace) -> Sizes:
    """The sizes named on a runner's command line."""
    return Sizes(width=args.width, chain=args.chain, layers=args.layers,
                 layer_width=args.layer_width)


def write_result(path: Path, system: str, versions: dict[str, str], workers: str,
                 sizes: Sizes, figures: dict[str, list[float]]) -> None:
    """The runner's result file: what ran, how its workers were started, every figure."""
    doc: dict[str, Any] = {"system": system, "versions": versions, "workers": workers,
                           "sizes": asdict(sizes), "figures": figures}
    path.write_text(json.dumps(doc, indent=2) + "\n")


def redis_url(db: int) -> str:
    """The Redis URL of database ``db`` on the server the orchestrator started."""
    base = os.environ.get(REDIS_URL_ENV)
    if not base:
        raise SystemExit(f"{REDIS_URL_ENV} is not set (run bench/peers/run.py, which starts "
                         "Redis and sets it)")
    return f"{base.rstrip('/')}/{db}"


def start_worker(argv: Sequence[str], log_path: Path, cwd: Path | None = None,
                 env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start a worker process in its own session, its output appended to ``log_path``."""
    log_file: TextIO = log_path.open("a")
    try:
        return subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=log_file, stderr=subprocess.STDOUT,
                                start_new_session=True)
    finally:
        log_file.close()


def stop_worker(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """SIGTERM the worker's process group, wait, and SIGKILL what is left."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def check_alive(proc: subprocess.Popen[bytes], log_path: Path) -> None:
    """Raise, with the tail of its log, if the worker has exited."""
    if proc.poll() is not None:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"worker exited with {proc.returncode}; log tail:\n{tail}")


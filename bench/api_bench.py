"""The HTTP API through ``dagq serve`` against the same calls made on the store directly:
submissions/s, status reads/s, a 1,000-workflow listing, and the CLI's start-to-answer
time for ``dagq status`` with and without ``--api``.

    .venv/bin/python bench/api_bench.py [--n 200]

The server runs on loopback over a temporary SQLite store; no coordinator runs, so what is
measured is the API's own cost (request parsing, routing, JSON) on top of the store.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "shared"))

from dagq.backends import open_backend  # noqa: E402
from dagq.client import WorkflowClient  # noqa: E402
from dagq.core.parse import load_definition  # noqa: E402
from dagq.remote.client import Client  # noqa: E402

DAGQ = str(Path(sys.executable).parent / "dagq")
DEFN = load_definition("name: b\ntasks:\n  - {name: a, kwargs: {cmd: 'true'}}\n"
                       "  - {name: b, kwargs: {cmd: 'true'}, depends_on: [a]}\n")


def rate(n: int, call: object) -> float:
    """Calls per second of ``call(i)`` for i in range(n)."""
    start = time.perf_counter()
    for i in range(n):
        call(i)  # type: ignore[operator]
    return n / (time.perf_counter() - start)


def cli_seconds(args: list[str], env: dict[str, str], runs: int = 5) -> float:
    """Median wall time of ``dagq ARGS``."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([DAGQ, *args], env=env, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=200, help="calls per measurement")
    n = parser.parse_args().n
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:{Path(tmp) / 'bench.db'}"
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("DAGQ_")},
               "DAGQ_STORE": store}
        log = open(Path(tmp) / "serve.log", "w+")  # noqa: SIM115 (closed below)
        server = subprocess.Popen([DAGQ, "serve", "--port", "0"], env=env, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        try:
            url = None
            for _ in range(300):
                log.seek(0)
                m = re.search(r"dagq API on (http://\S+/api)", log.read())
                if m:
                    url = m.group(1)
                    break
                time.sleep(0.1)
            assert url, "dagq serve did not start"
            backend = open_backend(store)
            direct = WorkflowClient(backend)
            remote = Client(url)
            rows = {
                "submit": (rate(n, lambda i: direct.submit(DEFN, workflow_id=f"d{i}")),
                           rate(n, lambda i: remote.submit(DEFN, workflow_id=f"r{i}"))),
                "status": (rate(n, lambda i: direct.status(f"d{i}")),
                           rate(n, lambda i: remote.status(f"r{i}"))),
                "tasks": (rate(n, lambda i: direct.tasks(f"d{i}")),
                          rate(n, lambda i: remote.tasks(f"r{i}"))),
            }
            for i in range(n, 500):  # 1,000 workflows in all for the listing
                direct.submit(DEFN, workflow_id=f"d{i}")
                direct.submit(DEFN, workflow_id=f"r{i}")
            listing = (1 / rate(3, lambda i: direct.list_workflows()),
                       1 / rate(3, lambda i: remote.list_workflows()))
            print(f"{'call':<10} {'store/s':>9} {'HTTP/s':>9}")
            for name, (a, b) in rows.items():
                print(f"{name:<10} {a:>9.0f} {b:>9.0f}")
            print(f"list 1,000 workflows: store {listing[0] * 1000:.0f} ms, "
                  f"HTTP {listing[1] * 1000:.0f} ms")
            print(f"dagq status (process start to answer): store "
                  f"{cli_seconds(['status', 'd0', '--json'], env):.2f} s, --api "
                  f"{cli_seconds(['--api', url, 'status', 'd0', '--json'], env):.2f} s")
            remote.close()
            backend.close()
        finally:
            server.terminate()
            server.wait(20)
            log.close()


if __name__ == "__main__":
    main()

"""Azurite micro-benchmark: what one state write and one queue receive cost there.

    .venv/bin/python bench/azurite_micro.py

Starts the project's pinned Azurite, then times (1) a delta append (Put Block + Put Block
List) onto a 120 KB state as its committed blocks grow, a read of that state and a whole
replace; (2) receive + delete of one message with 100 and with 5,000 messages waiting.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "shared"))
sys.path.insert(0, str(ROOT))

from dagq.backends import open_backend  # noqa: E402
from tests.fixtures.azurite import _start, _stop, connection_string  # noqa: E402


def main() -> None:
    proc, ports = _start(Path(tempfile.mkdtemp(prefix="dagq-azmicro-")))
    try:
        b = open_backend("azure://devstoreaccount1/micro",
                         connection_string=connection_string(ports))
        snap = os.urandom(120_000)
        etag = b.states.create("w", snap)
        t = time.perf_counter()
        for i in range(200):
            etag = b.states.append("w", b"x" * 300, etag)
            if i % 50 == 49:
                print(f"append with {i - 48}-{i + 1} blocks: "
                      f"{(time.perf_counter() - t) / 50 * 1000:.1f} ms each")
                t = time.perf_counter()
        t = time.perf_counter()
        for _ in range(20):
            data, _ = b.states.read("w")
        took = (time.perf_counter() - t) / 20 * 1000
        print(f"read of {len(data)} B in 201 blocks: {took:.1f} ms")
        t = time.perf_counter()
        for _ in range(20):
            etag = b.states.replace("w", snap, etag)
        print(f"replace: {(time.perf_counter() - t) / 20 * 1000:.1f} ms")
        q = b.queues.get("default")
        for n in (100, 5000):
            q.send_many([(b"x" * 300, 0.0, f"m{n}-{i}") for i in range(n)])
            t = time.perf_counter()
            for _ in range(20):
                q.delete_many(q.receive(2, 60))
            print(f"backlog {n}: receive + delete "
                  f"{(time.perf_counter() - t) / 20 * 1000:.1f} ms")
            while msgs := q.receive(32, 60):
                q.delete_many(msgs)
    finally:
        _stop(proc)


if __name__ == "__main__":
    main()

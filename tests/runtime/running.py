"""Running a coordinator and workers in threads of the test until a condition holds."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from dagq.runtime.coordinator import Coordinator
from dagq.worker.runtime import Worker


def run_threads_until(coord: Coordinator, workers: list[Worker], done: Callable[[], object],
                      describe: Callable[[], object], deadline_s: float) -> None:
    """Run ``coord`` and ``workers`` until ``done()`` is true; then stop and join them.
    Raises ``AssertionError(describe())`` if ``deadline_s`` passes first."""
    stop = threading.Event()
    threads = [threading.Thread(target=coord.run, args=(stop,), daemon=True)]
    threads += [threading.Thread(target=w.run, args=(False,), daemon=True) for w in workers]
    for t in threads:
        t.start()
    try:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if done():
                return
            time.sleep(0.1)
        raise AssertionError(describe())
    finally:
        stop.set()
        for w in workers:
            w.shutdown()
        for t in threads:
            t.join(timeout=10)

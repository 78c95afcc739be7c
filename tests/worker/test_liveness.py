"""The local liveness file: kept while a worker runs, gone when it stops, never taken
from another worker that shares it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from dagq.worker.liveness import Liveness, check


def running() -> threading.Thread:
    t = threading.Thread(target=threading.Event().wait, args=(5,), daemon=True)
    t.start()
    return t


def test_a_stopping_worker_leaves_the_file_of_a_worker_that_shares_it(tmp_path: Path) -> None:
    # two workers of one queue and store on one host share the default path
    path = tmp_path / "dagq-worker-default-x.alive"
    first, second = Liveness(path, "host:1:default"), Liveness(path, "host:2:default")
    first.watch([running()])
    second.watch([running()])  # the file now holds the second worker's id
    first.stop()
    assert check(path, time.time())[0], "the second worker is alive: its probe must pass"
    second.stop()
    assert not path.exists()
    assert check(path, time.time()) == (False, f"no liveness file {path} (is the worker "
                                                "running?)")

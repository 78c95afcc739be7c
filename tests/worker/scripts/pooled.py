"""A ``ProcessPool`` whose children are stand-ins for workers (for tests/worker/test_pool.py).

    python pooled.py MODE DIR SIZE EARLY_EXIT_S STALE_AFTER_S

Each child writes ``DIR/started.INDEX.PID`` and then, by MODE:
``wait``: runs until SIGTERM, touching its liveness file (not child 1 in ``stuck``), and
writes ``DIR/stopped.INDEX.PID``; ``done``: returns 0; ``fail``: returns 3.
The pool's liveness file is ``DIR/pool.alive``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from dagq.worker.liveness import Liveness
from dagq.worker.pool import ProcessPool

mode, root = sys.argv[1], Path(sys.argv[2])
size, early, stale = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])


def child(index: int) -> int:
    (root / f"started.{index}.{os.getpid()}").touch()
    if mode == "done":
        return 0
    if mode == "fail":
        return 3
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    alive = Liveness(Path(os.environ["DAGQ_LIVENESS_FILE"]), f"child-{index}")
    while not stopping:
        if not (mode == "stuck" and index == 1):
            alive.touch()
        time.sleep(0.05)
    (root / f"stopped.{index}.{os.getpid()}").touch()
    return 0


pool = ProcessPool(size, child, root / "pool.alive", echo=lambda line: print(line, flush=True),
                   early_exit_s=early, liveness_every_s=0.1, stale_after_s=stale, tick_s=0.05)
sys.exit(pool.run())

"""A stand-in worker to be killed: runs one command through ``run_process`` in a slot
thread, as the worker does, and waits to be killed.

Usage: ``python doomed.py LOG CMD``. SIGUSR1 stops the task (as a cancel does; the
SIGTERM grace is 60 s). The worker is a child subreaper, as ``dagq worker`` is.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from dagq.worker import proctree
from dagq.worker.process import run_process


def main() -> None:
    """Start the task, then sleep until killed."""
    log, cmd = Path(sys.argv[1]), sys.argv[2]
    proctree.enable_subreaper()
    stop = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: stop.set())
    threading.Thread(target=run_process, args=(["/bin/sh", "-c", cmd],), daemon=True,
                     kwargs={"env": dict(os.environ), "cwd": None, "log_path": log,
                             "stop": stop, "timeout_s": None, "kill_timeout": 60.0}).start()
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main()

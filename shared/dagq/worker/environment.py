"""The environment of task processes: the worker's own, made usable from a task."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dagq.config import Settings


def task_env(settings: Settings) -> dict[str, str]:
    """The worker's environment plus store settings made absolute for task processes."""
    env = dict(os.environ)
    # tasks find the worker's Python (and its dagq helpers) first on PATH
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    store = settings.store
    if store.startswith("sqlite:"):
        store = "sqlite:" + str(Path(store[len("sqlite:"):]).resolve())
    env["DAGQ_STORE"] = store
    if settings.queues:
        env["DAGQ_QUEUES"] = settings.queues
    env.pop("DAGQ_CRASH_AT", None)
    return env

"""Task processes die with their worker: a parent-death signal set before ``exec``.

A worker killed with SIGKILL (the OOM killer, a node lost, ``kill -9``) cannot stop its
tasks, and they run in their own sessions, so without help they keep running (and
holding GPUs) while their messages come back and another worker starts the same
attempts. ``die_with_parent`` runs in the forked child before it executes the task
(``subprocess.Popen(preexec_fn=...)``) and asks Linux to send it SIGKILL when the thread
that started it exits (``prctl(PR_SET_PDEATHSIG)``; see ``man 2 PR_SET_PDEATHSIG``): the
worker's slot thread waits on the task for as long as it runs, so that is the worker's
death. The setting survives ``exec`` but not ``fork``: it covers the task's own process;
processes the task starts in the background are the process-tree clean-up's concern.
Elsewhere than Linux it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    fn: Callable[..., int] = libc.prctl
    return fn


# looked up once in the worker: the forked child only calls it (no imports, no loading)
_PRCTL = _load_prctl()


def available() -> bool:
    """True where the parent-death signal can be set (Linux)."""
    return _PRCTL is not None


def die_with_parent_of(parent: int) -> Callable[[], None]:
    """A ``preexec_fn``: SIGKILL this child when its parent thread exits; if ``parent``
    (the worker's pid) is already gone by then, die at once."""

    def hook() -> None:
        if _PRCTL is None:
            return
        _PRCTL(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the worker died between fork and prctl
            os.kill(os.getpid(), signal.SIGKILL)

    return hook

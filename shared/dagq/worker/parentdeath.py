"""Task process trees die with their worker: every task runs under a small supervisor.

A worker killed with SIGKILL (the OOM killer, a node lost, ``kill -9``) cannot stop its
tasks, and they run in their own sessions, so without help they keep running (and
holding GPUs) while their messages come back and another worker starts the same
attempts. A parent-death signal on the task's own process (``prctl(PR_SET_PDEATHSIG)``,
see ``man 2 PR_SET_PDEATHSIG``) is not enough: it does not survive ``fork``, so
background children, double forks and ``setsid`` children would live on.

``wrap`` therefore starts a task as ``python -I -S supervisor.py WORKER_PID -- ARGV``
(``dagq.worker.supervisor``, or its up-to-date compiled file): one small process per
task, a child subreaper with a parent-death signal of its own, which on the worker's
death SIGKILLs every descendant of the task (orphans included: they are re-parented to
it) and otherwise exits as the task's first process did, so return codes, stops and
timeouts read as before. It costs an interpreter start per task (about 20 ms on a busy
2-core machine, ~9 MB resident of which ~3 MB private). The request is made by the
supervisor itself after ``exec`` (setting it between ``fork`` and ``exec`` would need a
``preexec_fn``, which can deadlock in a threaded process); Linux sends the signal when
the *thread* that started the process exits, here the worker's slot thread, which waits
on the task for as long as it runs. Where it cannot work (not Linux, no /proc, no
interpreter path) commands run unwrapped.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

SUPERVISOR = Path(__file__).with_name("supervisor.py")
"""The supervisor script, run by path (``-I -S``: no site packages, nothing of dagq)."""

_AVAILABLE = (sys.platform.startswith("linux") and bool(sys.executable)
              and SUPERVISOR.is_file() and Path("/proc/self/stat").exists())


def script(source: Path) -> str:
    """What to run for the script ``source``: its compiled file where the import system
    left an up-to-date one (``__pycache__``, timestamp-checked; saves compiling the source,
    about 3 ms, for every task), else the source itself."""
    try:
        cached = importlib.util.cache_from_source(str(source))
        with open(cached, "rb") as f:
            head = f.read(16)
        st = source.stat()
    except (OSError, NotImplementedError, ValueError):
        return str(source)
    fields = [int.from_bytes(head[i:i + 4], "little") for i in (4, 8, 12)]
    fresh = (len(head) == 16 and head[:4] == importlib.util.MAGIC_NUMBER
             and fields == [0, int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF])
    return cached if fresh else str(source)


_SCRIPT = script(SUPERVISOR) if _AVAILABLE else ""


def available() -> bool:
    """True where tasks run under the supervisor (Linux with /proc)."""
    return _AVAILABLE


def wrap(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """``argv``, to be started with the environment ``env``, run so that its whole
    process tree dies with this process (unchanged if it cannot be)."""
    if not _AVAILABLE:
        return list(argv)
    ctype = env.get("LC_CTYPE")  # the interpreter may change it (see supervisor.main)
    keep = ["--unset", "LC_CTYPE"] if ctype is None else ["--set", f"LC_CTYPE={ctype}"]
    return [sys.executable, "-I", "-S", _SCRIPT, str(os.getpid()), *keep, "--", *argv]

"""Task process trees die with their worker: every task runs under a small supervisor.

A worker killed with SIGKILL (the OOM killer, a node lost, ``kill -9``) cannot stop its
tasks, and they run in their own sessions, so without help they keep running (and
holding GPUs) while their messages come back and another worker starts the same
attempts. A parent-death signal on the task's own process (``prctl(PR_SET_PDEATHSIG)``,
see ``man 2 PR_SET_PDEATHSIG``) is not enough: it does not survive ``fork``, so
background children, double forks and ``setsid`` children would live on.

``wrap`` therefore starts a task as ``dagq-supervisor WORKER_PID -- ARGV``: one small
process per task, a child subreaper with a parent-death signal of its own, which on the
worker's death SIGKILLs every descendant of the task (orphans included: they are
re-parented to it) and otherwise exits as the task's first process did, so return codes,
stops and timeouts read as before. ``dagq-supervisor`` is ``supervisor.c`` compiled
(``scripts/setup`` puts it in ``.venv/bin``, the images in ``/opt/venv/bin``; found by
``find_binary``) and costs about 1 ms per task; a worker runs it once instead, as its
spawn server (``dagq.worker.spawner``: the same guarantees for all of its tasks, one
``vfork`` and ``execve`` per task). Without it the same supervisor runs as
``python -I -S supervisor.py WORKER_PID --unset LC_CTYPE -- ARGV`` (``dagq.worker.
supervisor``, or its up-to-date compiled file), which costs an interpreter start per task
(about 20 ms on a busy 2-core machine, ~9 MB resident of which ~3 MB private); the worker
warns once.

The parent-death signal is requested by the supervisor itself after ``exec`` (setting it
between ``fork`` and ``exec`` would need a ``preexec_fn``, which can deadlock in a
threaded process); Linux sends the signal when the *thread* that started the process
exits, here the worker's slot thread, which waits on the task for as long as it runs.
Where it cannot work (not Linux, no /proc, no interpreter path) commands run unwrapped.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

SUPERVISOR = Path(__file__).with_name("supervisor.py")
"""The supervisor script, run by path (``-I -S``: no site packages, nothing of dagq)."""

SUPERVISOR_C = Path(__file__).with_name("supervisor.c")
"""The same supervisor in C, compiled to ``BINARY`` (``scripts/setup``, the images)."""
BINARY = "dagq-supervisor"
SUPERVISOR_ENV = "DAGQ_SUPERVISOR"
"""Names the supervisor to run: the compiled one's path, or a ``supervisor.py``."""
SERVER_ENV = "DAGQ_SPAWN_SERVER"
"""``0`` runs the compiled supervisor once per task instead of as this process's spawn
server (``dagq.worker.spawner``): the way tasks were started before the server."""

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

_log = logging.getLogger(__name__)


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_binary() -> str | None:
    """The compiled supervisor to run, if any: ``$DAGQ_SUPERVISOR`` (a path), else
    ``dagq-supervisor`` beside this interpreter (``.venv/bin``; ``/opt/venv/bin`` in the
    images), else on ``PATH``. None where ``$DAGQ_SUPERVISOR`` names a ``.py`` file (the
    Python supervisor) or nothing is found."""
    chosen = os.environ.get(SUPERVISOR_ENV, "")
    if chosen.endswith(".py"):
        return None
    if chosen:
        if _executable(chosen):
            return chosen
        _log.warning("%s=%s is not an executable file; looking for %s elsewhere",
                     SUPERVISOR_ENV, chosen, BINARY)
    beside = str(Path(sys.executable).with_name(BINARY)) if sys.executable else ""
    if beside and _executable(beside):
        return beside
    return shutil.which(BINARY)


@functools.lru_cache(maxsize=1)
def command() -> tuple[str, ...]:
    """The supervisor's command line up to WORKER_PID: the compiled one (about 1 ms per
    task) where ``find_binary`` finds it, else ``python -I -S supervisor.py`` (about
    20 ms; warned once, unless chosen by ``$DAGQ_SUPERVISOR``). Cached:
    ``command.cache_clear()`` looks again."""
    binary = find_binary()
    if binary is not None:
        with contextlib.suppress(OSError):
            if SUPERVISOR_C.stat().st_mtime > os.stat(binary).st_mtime:
                _log.warning("the task supervisor %s is older than its source %s; "
                             "rebuild it (scripts/setup)", binary, SUPERVISOR_C)
        return (binary,)
    chosen = os.environ.get(SUPERVISOR_ENV, "")
    if chosen.endswith(".py"):
        return (sys.executable, "-I", "-S", script(Path(chosen)))
    _log.warning("no compiled task supervisor (%s) found: tasks run under the Python one, "
                 "about 20 ms more per task; build it with scripts/setup, or "
                 "`cc -O2 -o %s %s`", BINARY, Path(sys.executable).with_name(BINARY),
                 SUPERVISOR_C)
    return (sys.executable, "-I", "-S", _SCRIPT)


def serving() -> bool:
    """True where tasks start through the spawn server: the compiled supervisor runs and
    ``$DAGQ_SPAWN_SERVER`` is not ``0``."""
    return (_AVAILABLE and len(command()) == 1
            and os.environ.get(SERVER_ENV, "1").strip().lower() not in ("0", "false", "no"))


def available() -> bool:
    """True where tasks run under the supervisor (Linux with /proc)."""
    return _AVAILABLE


def wrap(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """``argv``, to be started with the environment ``env``, run so that its whole
    process tree dies with this process (unchanged if it cannot be)."""
    if not _AVAILABLE:
        return list(argv)
    prefix = command()
    if len(prefix) == 1:  # compiled: nothing changes the environment it was given
        return [*prefix, str(os.getpid()), "--", *argv]
    ctype = env.get("LC_CTYPE")  # the interpreter may change it (see supervisor.main)
    keep = ["--unset", "LC_CTYPE"] if ctype is None else ["--set", f"LC_CTYPE={ctype}"]
    return [*prefix, str(os.getpid()), *keep, "--", *argv]

"""A task's whole process tree: find every descendant, signal them all, reap orphans.

A task runs in its own process group, but programs may leave the group (``setsid``, a
daemon's double fork). Members of a task are found three ways, on Linux through /proc:

* the process group of the *root*, the process started for the task (on Linux its
  supervisor, ``dagq.worker.supervisor``, whose child, the task's first process, leads
  a group of its own);
* parent links: every process whose parent is a member;
* a token in the environment (``DAGQ_PROCESS_TOKEN``), inherited by every descendant
  that keeps its environment, even once re-parented after its parent exited.

A worker process may also become a *child subreaper* (Linux ``PR_SET_CHILD_SUBREAPER``):
orphaned descendants are then re-parented to it instead of to init, so they stay its
descendants (``own_descendants``) and it reaps them (``reap_orphans``). A process that
both leaves the session and clears its environment is only reachable that way (or with a
cgroup or a container per task); the task supervisor is a subreaper too, so while it runs
every process of the task is its descendant. ``signal_all`` signals the root's group,
every group a member leads, and each other member. Without /proc only the process group
is signalled.
Members are identified by pid *and* start time, so a recycled pid is never signalled.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path

TOKEN_ENV = "DAGQ_PROCESS_TOKEN"
PROC = Path("/proc")
PR_SET_CHILD_SUBREAPER = 36

Member = tuple[int, int]
"""``(pid, start time in clock ticks since boot)``."""

_roots: set[int] = set()
_roots_lock = threading.Lock()
_subreaper = False


def new_token() -> str:
    """A fresh value for ``TOKEN_ENV`` naming one task's processes."""
    return uuid.uuid4().hex


def enable_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (Linux); True if it is."""
    global _subreaper
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        _subreaper = False
    return _subreaper


def roots_lock() -> threading.Lock:
    """Held while starting a task process and registering it with ``add_root``, so
    that ``reap_orphans`` never takes the exit status meant for ``Popen.wait``."""
    return _roots_lock


def add_root(pid: int) -> None:
    """Register a task process this process started (``Popen`` waits for it)."""
    _roots.add(pid)


def remove_root(pid: int) -> None:
    """Forget a task process once ``Popen`` has waited for it."""
    with _roots_lock:
        _roots.discard(pid)


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """``(state, ppid, pgid, start time)`` of ``pid``, or None if it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields[0], int(fields[1]), int(fields[2]), int(fields[19])


def _has_token(pid: int, token: bytes) -> bool:
    try:
        return token in (PROC / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _table() -> dict[int, tuple[str, int, int, int]]:
    out: dict[int, tuple[str, int, int, int]] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir(PROC):
            if entry.name.isdigit():
                st = _stat(int(entry.name))
                if st is not None:
                    out[int(entry.name)] = st
    return out


def members(root: int, token: str | None) -> set[Member]:
    """Live processes of the task whose first process is ``root`` (see module doc)."""
    table = _table()
    mark = f"{TOKEN_ENV}={token}".encode() if token else None
    found = {pid for pid, st in table.items()
             if st[0] != "Z" and (pid == root or st[2] == root
                                  or (mark is not None and _has_token(pid, mark)))}
    children: dict[int, list[int]] = {}
    for pid, st in table.items():
        children.setdefault(st[1], []).append(pid)
    todo = list(found)
    while todo:
        for kid in children.get(todo.pop(), []):
            if kid not in found and table[kid][0] != "Z":
                found.add(kid)
                todo.append(kid)
    return {(pid, table[pid][3]) for pid in found}


def own_descendants() -> set[Member]:
    """Every live descendant of this process (with a subreaper: also orphaned ones)."""
    table = _table()
    me = os.getpid()
    found: set[int] = set()
    todo = [me]
    while todo:
        parent = todo.pop()
        for pid, st in table.items():
            if st[1] == parent and pid not in found and st[0] != "Z":
                found.add(pid)
                todo.append(pid)
    return {(pid, table[pid][3]) for pid in found}


def alive(member: Member) -> bool:
    """True if the member still runs (not a zombie, pid not recycled)."""
    st = _stat(member[0])
    return st is not None and st[0] != "Z" and st[3] == member[1]


def signal_all(root: int, known: Iterable[Member], sig: signal.Signals) -> None:
    """Send ``sig`` to the group of ``root``, to every group led by a member of ``known``
    still alive (at once: also to members forked since the scan), and to every other
    member still alive (once each: a shell's trap does not run twice)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(root, sig)
    groups = {root}
    live = []
    for pid, started in known:
        st = _stat(pid)
        if st is not None and st[0] != "Z" and st[3] == started:
            live.append((pid, st[2]))
    for pid, pgid in live:
        if pid == pgid and pid not in groups:
            groups.add(pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)
    for pid, pgid in live:
        if pgid not in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


def reap_orphans() -> int:
    """Wait for exited children that are not registered task processes (descendants
    re-parented to this subreaper); how many were reaped."""
    if not _subreaper:
        return 0
    me = os.getpid()
    reaped = 0
    with _roots_lock:
        for pid, st in _table().items():
            if st[1] == me and st[0] == "Z" and pid not in _roots:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
                    reaped += 1
    return reaped

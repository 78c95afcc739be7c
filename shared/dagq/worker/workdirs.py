"""An attempt's working directory: made private for it, removed off the slot's path.

Each attempt runs in a directory of its own under the temporary folder, holding its
inputs file and, once the task writes it, its output file (``dagq.worker.environment``).
Making and removing one is on every task's path, so both are kept to a few system calls.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import shutil
import tempfile
import threading
from pathlib import Path

from dagq.worker.environment import INPUTS_FILE, OUTPUT_FILE
from dagq.worker.pacer import PACER, Pacer

_WORKDIRS = itertools.count()


def new_workdir() -> Path:
    """A new, private (0700) working directory for one attempt, under the temporary folder.

    Named by this process's id and a counter: ``tempfile.mkdtemp`` draws a random name
    for each call, which costs about four times the ``mkdir`` itself. A name that exists
    already (a directory left by an earlier process of the same id, or one planted by
    someone else) is never reused: ``mkdir`` refuses it, and ``mkdtemp`` picks another."""
    path = os.path.join(tempfile.gettempdir(), f"dagq-task-{os.getpid()}-{next(_WORKDIRS)}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        path = tempfile.mkdtemp(prefix="dagq-task-")
    return Path(path)


def remove_workdir(path: Path) -> None:
    """Remove an attempt's working directory: most hold only the files the worker put
    there, and removing those by name costs a fraction of walking the tree."""
    if not _remove_known(path):  # the task left more behind
        shutil.rmtree(path, ignore_errors=True)


def discard_workdir(path: Path, pacer: Pacer = PACER) -> None:
    """Remove an attempt's working directory off the slot's path, on the worker's pacer
    thread (removing two files and a directory takes about 0.2 ms on some file systems,
    which the next attempt need not wait for); what a task left behind is removed by a
    thread of its own, so the pacer's other callbacks are not held up."""

    def remove() -> None:
        with _PENDING_LOCK:
            if path not in _PENDING:  # removed by remove_pending_workdirs
                return
            _PENDING.discard(path)
        if not _remove_known(path):
            threading.Thread(target=shutil.rmtree, args=(path,), kwargs={"ignore_errors": True},
                             name="dagq-workdir-removal", daemon=True).start()

    with _PENDING_LOCK:
        _PENDING.add(path)
    pacer.call_later(REMOVE_AFTER_S, remove)


def remove_pending_workdirs() -> None:
    """Remove now the directories ``discard_workdir`` has not removed yet (a worker that
    stops leaves none behind)."""
    with _PENDING_LOCK:
        paths = list(_PENDING)
        _PENDING.clear()
    for path in paths:
        remove_workdir(path)


REMOVE_AFTER_S = 0.05
"""How long a discarded workdir waits: removals due together run in one wake-up of the
pacer, not one each (at hundreds of tasks a second, each wake-up is a hand-over of the
interpreter lock the slots wait on)."""
_PENDING: set[Path] = set()
_PENDING_LOCK = threading.Lock()


def _remove_known(path: Path) -> bool:
    """Remove ``path`` holding at most the files the worker knows (True), trying the
    output file only when the directory is not empty after the inputs file went."""
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path / INPUTS_FILE)
        try:
            os.rmdir(path)
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY:
                raise
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path / OUTPUT_FILE)
            os.rmdir(path)  # not empty still: the task left more (rmtree)
    except FileNotFoundError:  # the directory is gone already
        return True
    except OSError:
        return False
    return True

"""The embedded runtime's trigger watcher: polls the local directories of ``files``
triggers and fires one run per new file version.

A file's version is its modification time (ns) and size; a file fires once it has not
changed for ``settle_s`` seconds (so a file still being written is not picked up half
way). The watcher remembers what it fired in memory only: after a restart it submits
every matching file again, and the deterministic run ids turn those into no-ops
(``created=False``), so nothing runs twice.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from dagq.client import WorkflowClient
from dagq.errors import DagqError
from dagq.ports import Backend
from dagq.triggers.fire import Fired, fire
from dagq.triggers.store import Trigger, TriggerStore

log = logging.getLogger("dagq.triggers")

MAX_FILES_PER_POLL = 10_000
"""Most files one trigger's walk looks at per poll (the rest wait for the next poll)."""


def file_version(st: os.stat_result) -> str:
    """``{mtime_ns:x}-{size:x}`` of a file: changes whenever it is rewritten."""
    return f"{st.st_mtime_ns:x}-{st.st_size:x}"


def watch_root(prefix: str) -> Path:
    """The directory to walk for ``prefix``: itself when it names a directory (or ends
    with a separator), else its parent."""
    path = Path(prefix)
    return path if prefix.endswith(os.sep) or path.is_dir() else path.parent


def candidates(trigger: Trigger) -> Iterator[tuple[str, os.stat_result]]:
    """``(path, stat)`` of the regular files under ``trigger.prefix``, in path order."""
    root = watch_root(trigger.prefix)
    if not root.is_dir():
        return
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if not path.startswith(trigger.prefix):
                continue
            try:
                st = os.stat(path)
            except OSError:
                continue  # removed while we looked
            seen += 1
            if seen > MAX_FILES_PER_POLL:
                return
            yield path, st


class Watcher:
    """Polls every ``files`` trigger of one store; ``poll()`` is one pass."""

    def __init__(self, backend: Backend, *, settle_s: float = 1.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = TriggerStore(backend)
        self.client = WorkflowClient(backend, clock)
        self.settle_s = settle_s
        self.clock = clock
        self.fired: dict[tuple[str, str], str] = {}
        """``(trigger, path)`` -> the version last submitted."""

    def poll(self) -> list[Fired]:
        """Submit a run for every new, settled file version; returns what was asked for
        (``created=False`` entries are runs that existed already)."""
        out: list[Fired] = []
        now = self.clock()
        for trigger in self.store.list("files"):
            for path, st in candidates(trigger):
                version = file_version(st)
                key = (trigger.name, path)
                if self.fired.get(key) == version:
                    continue
                if now - st.st_mtime < self.settle_s:
                    continue  # maybe still being written: next poll
                try:
                    result = fire(self.client, trigger, path, version)
                except DagqError as exc:  # the store is down: try again at the next poll
                    log.warning("trigger %r: %s: %s", trigger.name, path, exc)
                    return out
                self.fired[key] = version
                out.append(result)
        return out

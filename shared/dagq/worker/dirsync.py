"""Background directory sync (``kwargs.bg_dirsync_to``): the uploading side.

While a task runs, a ``DirSync`` thread uploads the new and changed files of one local
directory to output storage every few seconds, and once more when the task ends. A file
is read only when its size or mtime changed since the last look, and uploaded only when
its MD5 differs from what the store holds. Objects are named
``dirs/{workflow_id}/{name}/{relative path}`` by :mod:`dagq.core.paths` (each part
encoded, ``name`` one segment), where ``name`` is the task's name unless the spec gives
``dest``. Sync never fails a task: errors are logged and retried on the
next round. Files deleted locally stay in the store. Listing and fetching what was
synced is ``dagq.protocol.synced``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from dagq.core.limits import blob_name_problem
from dagq.core.paths import dir_entry, dir_prefix, dir_relative, files_prefix, segment_problem
from dagq.errors import TaskError
from dagq.ports import OutputStore

log = logging.getLogger("dagq.worker.dirsync")

DEFAULT_INTERVAL = 5.0
"""Seconds between sync rounds unless ``every_s`` or ``Settings.dirsync_interval`` says
otherwise."""
RACY_NS = 2_000_000_000
"""Files modified this recently (ns) before a scan are hashed again on the next round, since
a second write within the file system's timestamp granularity leaves size and mtime alone."""
SPEC_KEYS = {"path", "every_s", "dest"}


@dataclass(frozen=True)
class SyncSpec:
    """What to sync: a local directory, how often, and where to."""

    path: Path
    """The local directory (absolute)."""
    every_s: float
    """Seconds between rounds."""
    name: str
    """Name under ``dirs/{workflow_id}/`` (the task's name unless ``dest`` was given)."""


def parse_spec(value: Any, *, task: str, cwd: str | None, default_every: float) -> SyncSpec:
    """The ``SyncSpec`` of a ``bg_dirsync_to`` value: ``DIR`` or ``{path: DIR, every_s: N,
    dest: NAME}``; ``DIR`` is relative to ``cwd`` (else the worker's directory) unless
    absolute. Raises ``TaskError`` naming the bad part."""
    spec = {"path": value} if isinstance(value, str) else value
    if not isinstance(spec, Mapping):
        raise TaskError("kwargs.bg_dirsync_to must be a directory path or a mapping "
                        f"{{path, every_s, dest}}, got {type(value).__name__}")
    unknown = sorted(set(spec) - SPEC_KEYS)
    if unknown:
        raise TaskError(f"kwargs.bg_dirsync_to has unknown key(s) {', '.join(unknown)}; "
                        f"allowed: {', '.join(sorted(SPEC_KEYS))}")
    path = spec.get("path")
    if not isinstance(path, str) or not path.strip():
        raise TaskError("kwargs.bg_dirsync_to.path must be a non-empty directory path")
    every = spec.get("every_s", default_every)
    if isinstance(every, bool) or not isinstance(every, int | float) or not every > 0:
        raise TaskError(f"kwargs.bg_dirsync_to.every_s must be a number of seconds above 0, "
                        f"got {every!r}")
    name = task  # one encoded object-name segment, whatever characters the task name has
    if "dest" in spec:
        dest = spec["dest"]
        parts = PurePosixPath(dest).parts if isinstance(dest, str) else ()
        if not parts or dest.startswith("/") or ".." in parts or "\\" in dest:
            raise TaskError(f"kwargs.bg_dirsync_to.dest must be a relative name like 'ckpt' "
                            f"or 'train/ckpt' (no '..'), got {dest!r}")
        name = "/".join(parts)
    if (problem := segment_problem(name, "kwargs.bg_dirsync_to.dest")) is not None:
        raise TaskError(problem)
    local = Path(path)
    if not local.is_absolute():
        local = Path(cwd or os.getcwd()) / local
    return SyncSpec(Path(os.path.abspath(local)), float(every), name)


class DirSync:
    """Keeps ``prefix`` in ``outputs`` up to date with the files under ``local``."""

    def __init__(self, outputs: OutputStore, local: Path, prefix: str, every_s: float,
                 label: str = "") -> None:
        self.outputs = outputs
        self.local = local
        self.prefix = prefix
        self.every_s = every_s
        self.label = label or prefix
        self.uploads = 0
        """Files sent to the store."""
        self.unchanged = 0
        """Looks at a file that found nothing new to send."""
        self.errors = 0
        """Rounds cut short by a store error."""
        self.bytes_sent = 0
        self._seen: dict[str, tuple[int, int]] = {}
        self._skipped: set[str] = set()
        self._remote: dict[str, str] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Sync in a background thread every ``every_s`` seconds until ``stop()``."""
        self._thread = threading.Thread(target=self._loop, name=f"dagq-dirsync-{self.label}",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and sync one last time."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sync_once()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sync_once()

    def sync_once(self) -> int:
        """Upload what changed since the last round; the number of files sent. Never raises."""
        with self._lock:
            try:
                return self._round()
            except Exception as exc:  # the task must not fail because its sync did
                self.errors += 1
                log.warning("dirsync of %s to %s failed (retried next round): %s",
                            self.local, self.prefix, exc)
                return 0

    def _round(self) -> int:
        if self._remote is None:
            self._remote = {dir_relative(self.prefix, name): md5
                            for name, _, md5 in self.outputs.list(self.prefix)}
        scan_ns = time.time_ns()
        sent = 0
        for path, rel in _files(self.local):
            try:
                st = path.stat()
                sig = (st.st_size, st.st_mtime_ns)
                if self._seen.get(rel) == sig:
                    self.unchanged += 1
                    continue
                data = path.read_bytes()
            except OSError:  # removed or unreadable between the walk and the read
                continue
            md5 = hashlib.md5(data, usedforsecurity=False).hexdigest()
            obj = dir_entry(self.prefix, rel)
            if (problem := blob_name_problem(obj)) is not None:
                if rel not in self._skipped:
                    self._skipped.add(rel)
                    log.warning("dirsync of %s skips %s: %s", self.local, rel, problem)
                continue
            if self._remote.get(rel) != md5:
                self._remote[rel] = self.outputs.put(obj, data)
                self.uploads += 1
                self.bytes_sent += len(data)
                sent += 1
            else:
                self.unchanged += 1
            if st.st_mtime_ns < scan_ns - RACY_NS:
                self._seen[rel] = sig
            else:
                self._seen.pop(rel, None)
        return sent


def start_task_sync(outputs: OutputStore, kwargs: Mapping[str, Any], workflow_id: str,
                    task: str, label: str, default_every: float) -> DirSync | None:
    """A started ``DirSync`` if the task's ``kwargs`` ask for one (a bad spec is logged,
    not fatal)."""
    value = kwargs.get("bg_dirsync_to")
    if value is None:
        return None
    cwd = kwargs.get("cwd")
    try:
        spec = parse_spec(value, task=task, cwd=str(cwd) if cwd else None,
                          default_every=default_every)
    except TaskError as exc:
        log.error("%s: not syncing a directory: %s", label, exc)
        return None
    sync = DirSync(outputs, spec.path, dir_prefix(workflow_id, spec.name), spec.every_s,
                   label=label)
    sync.start()
    return sync


def synced_prefixes(kwargs: Mapping[str, Any], workflow_id: str, task: str) -> list[str]:
    """Where one task's synced files are stored: its stashed files (``dagq.task``), then
    the directory its ``bg_dirsync_to`` names (if any and valid)."""
    out = [files_prefix(workflow_id, task)]
    value = kwargs.get("bg_dirsync_to")
    if value is not None:
        cwd = kwargs.get("cwd")
        try:
            spec = parse_spec(value, task=task, cwd=str(cwd) if cwd else None,
                              default_every=60.0)
        except TaskError:
            return out
        out.append(dir_prefix(workflow_id, spec.name))
    return out


def finish_task_sync(sync: DirSync, stats: Counter[str]) -> None:
    """Stop ``sync`` after its last round and add its counts to ``stats``."""
    sync.stop()
    stats["dirsync_uploads"] += sync.uploads
    stats["dirsync_unchanged"] += sync.unchanged
    stats["dirsync_errors"] += sync.errors
    log.info("dirsync %s -> %s: %d file(s) uploaded, %d unchanged, %d failed round(s)",
             sync.local, sync.prefix, sync.uploads, sync.unchanged, sync.errors)


def _files(root: Path) -> list[tuple[Path, str]]:
    """Regular files under ``root`` with their ``/``-separated relative paths, sorted."""
    out: list[tuple[Path, str]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(dirpath)
        for fn in sorted(filenames):
            path = base / fn
            if path.is_file():
                out.append((path, path.relative_to(root).as_posix()))
    return out

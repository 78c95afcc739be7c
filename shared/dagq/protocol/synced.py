"""Reading back the directories tasks synced (``kwargs.bg_dirsync_to``).

Objects are named ``dirs/{workflow_id}/{name}/{relative path}`` by ``dagq.core.paths``;
``dagq.worker.dirsync`` uploads them. Every file read here is checked against the MD5
the store lists for it, and no path may leave the directory it is written into.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from dagq.core.paths import dir_entry, dir_prefix, dir_relative
from dagq.errors import NotFound, TaskError
from dagq.ports import OutputStore


def list_synced(outputs: OutputStore, workflow_id: str, name: str) -> list[tuple[str, int, str]]:
    """``(relative path, size, md5)`` of the files synced for ``name`` in ``workflow_id``."""
    prefix = dir_prefix(workflow_id, name)
    return [(dir_relative(prefix, obj), size, md5) for obj, size, md5 in outputs.list(prefix)]


def download_synced(outputs: OutputStore, workflow_id: str, name: str,
                    dest: Path) -> list[Path]:
    """Download the synced files of ``name`` into ``dest`` (created), each checked against
    its MD5; the paths written. Raises ``TaskError`` on a corrupt or unsafe file."""
    prefix = dir_prefix(workflow_id, name)
    entries = list_synced(outputs, workflow_id, name)
    return write_files(dest, prefix, [(rel, md5) for rel, _, md5 in entries],
                       lambda rel, md5: _verified(outputs, dir_entry(prefix, rel), md5))


def write_files(dest: Path, label: str, entries: list[tuple[str, str]],
                fetch: Callable[[str, str], bytes]) -> list[Path]:
    """Write each ``(relative path, md5)`` of ``entries`` under ``dest`` with the bytes
    ``fetch(path, md5)`` returns; ``TaskError`` for a path that would leave ``dest``."""
    root = Path(os.path.abspath(dest))
    written = []
    for rel, md5 in entries:
        target = Path(os.path.abspath(root / rel))
        if root not in target.parents:
            raise TaskError(f"synced file {label}{rel} would land outside {root}; refusing")
        data = fetch(rel, md5)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written.append(target)
    return written


def read_synced(outputs: OutputStore, workflow_id: str, name: str, rel: str) -> bytes:
    """The MD5-checked bytes of one synced file; ``NotFound`` when there is none."""
    if not rel or rel.startswith("/") or ".." in PurePosixPath(rel).parts:
        raise TaskError(f"file path {rel!r} must be relative, like 'ckpt/model.pt' (no '..')")
    full = dir_entry(dir_prefix(workflow_id, name), rel)
    md5 = [m for n, _, m in outputs.list(full) if n == full]
    if not md5:
        raise NotFound(f"task {name!r} of workflow {workflow_id!r} synced no file {rel!r} "
                       f"(list them with `dagq files {workflow_id} {name}`)")
    return _verified(outputs, full, md5[0])


def _verified(outputs: OutputStore, name: str, md5: str, tries: int = 3) -> bytes:
    """The bytes of ``name``; a mismatch with ``md5`` is re-checked against a fresh listing,
    since a running sync may have replaced the object between the listing and the read."""
    for _ in range(tries):
        data = outputs.get(name)
        actual = hashlib.md5(data, usedforsecurity=False).hexdigest()
        if not md5 or actual == md5:
            return data
        fresh = [m for n, _, m in outputs.list(name) if n == name]
        if not fresh:
            raise NotFound(f"synced file {name} disappeared while it was being downloaded")
        md5 = fresh[0]
    raise TaskError(f"synced file {name} is corrupt: MD5 {actual} != expected {md5}")

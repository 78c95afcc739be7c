"""The task cache as stored: one record per cache key, written by the worker that
computed the result and read by the coordinator before it dispatches a cached task.

Records live in partition ``cache`` keyed by the cache key (``dagq.core.caching``)::

    {"key", "task", "workflow", "workflow_id", "attempt", "created_at", "digest",
     "output" | "ref": [name, md5, size], "components": {...}}

An output of up to ``INLINE_BYTES`` of JSON is kept in the record, as its canonical text
(a store may reorder an object's keys, and the digest is of the bytes); a larger one is
copied to ``cache/{key}/{run}/{task}.{attempt}.json`` in output storage (never a run's
own object: pruning a run keeps its cache entries whole; and a hit copies it into the
run that uses it, so clearing the cache leaves finished runs whole). ``digest`` is the
MD5 of the canonical output bytes and is checked on every use: an entry that is corrupt,
cut short or missing its object is a miss, never a failure. The first writer of a key
wins (``"*new"``); a second run that computed the same key keeps its own result and the
entry stays as it was, unless the entry is not usable (corrupt, or older than the
writer's ``max_age``): then the writer replaces it under its ETag.

A second partition per workflow name, ``cache~{name}``, keyed ``{task}/{created_ms}``,
points at the entries a task of that workflow made, newest last: ``dagq plan`` compares
with it to say which key component changed since.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field, replace
from typing import Any

from dagq.core import values
from dagq.core.limits import utf16_bytes
from dagq.core.model import OutputRef
from dagq.core.paths import segment
from dagq.errors import AlreadyExists, DagqError, NotFound, PreconditionFailed
from dagq.ports import Backend
from dagq.protocol.messages import CompletionMessage, TaskMessage
from dagq.protocol.outputs import fetch_verified

log = logging.getLogger("dagq.cache")

PARTITION = "cache"
INLINE_BYTES = 8 * 1024
"""Largest output kept inside an entry (Azure Table string properties hold 64 KiB of
UTF-16, and an entry holds its key components too)."""
RECORD_BYTES = 60 * 1024
"""Largest record written, counted as Azure Table Storage counts a string property
(UTF-16 bytes, 64 KiB at most): a larger one keeps its output in output storage."""
MAX_COMPONENT_BYTES = 16 * 1024
"""Components larger than this keep one digest for all inputs instead of one each."""


def task_partition(workflow: str) -> str:
    """The partition listing the entries made by the tasks of workflows named ``workflow``."""
    return f"cache~{workflow}"


def object_name(key: str, workflow_id: str, task: str, attempt: int) -> str:
    """Where the large output of the entry of ``key`` written by one attempt is stored
    (each writer its own: a second writer of a key never touches the first's bytes;
    two tasks of one run may share a key, so the task is part of the name)."""
    return f"cache/{key}/{segment(workflow_id)}/{segment(task)}.{attempt}.json"


@dataclass(frozen=True)
class Entry:
    """One cached result."""

    key: str
    """The cache key."""
    task: str
    """The task that computed it."""
    workflow: str
    """The name of that task's workflow."""
    workflow_id: str
    """The run it came from."""
    attempt: int
    """The attempt that computed it."""
    created_at: float
    """When it was stored (epoch seconds)."""
    digest: str
    """MD5 (hex) of the canonical output bytes (``""`` for a task with no output)."""
    output: Any = None
    """The output, when small."""
    ref: OutputRef | None = None
    """Where a large output is kept."""
    components: dict[str, Any] = field(default_factory=dict)
    """The key's components (``dagq.core.caching.components``)."""
    synced: dict[str, Any] | None = None
    """The files the task synced or stashed: ``{"prefixes", "files", "digest"}`` (the
    source run's object prefixes, how many objects, a digest of their names and MD5s)."""
    data: bytes | None = field(default=None, compare=False, repr=False)
    """The verified bytes of a large output, when ``lookup`` read them."""

    def source(self) -> str:
        """``run/task/attempt`` the result came from."""
        return f"{self.workflow_id}/{self.task}/{self.attempt}"

    def to_json(self) -> dict[str, Any]:
        """The stored record."""
        out: dict[str, Any] = {
            "key": self.key, "task": self.task, "workflow": self.workflow,
            "workflow_id": self.workflow_id, "attempt": self.attempt,
            "created_at": self.created_at, "digest": self.digest,
            "components": self.components}
        if self.synced:
            out["synced"] = self.synced
        if self.ref is not None:
            out["ref"] = [self.ref.name, self.ref.md5, self.ref.size]
        elif self.output is not None:  # as text: a store may reorder an object's keys
            out["output_json"] = values.dumps(self.output).decode()
        return out

    @staticmethod
    def from_json(raw: dict[str, Any]) -> Entry:
        """An entry from its record; ``KeyError``/``TypeError``/``ValueError`` if malformed."""
        ref = raw.get("ref")
        text = raw.get("output_json")
        output = json.loads(text) if isinstance(text, str) else raw.get("output")
        return Entry(str(raw["key"]), str(raw["task"]), str(raw["workflow"]),
                     str(raw["workflow_id"]), int(raw["attempt"]), float(raw["created_at"]),
                     str(raw["digest"]), output,
                     OutputRef(str(ref[0]), str(ref[1]), int(ref[2])) if ref else None,
                     dict(raw.get("components") or {}),
                     dict(raw["synced"]) if isinstance(raw.get("synced"), dict) else None)


def output_digest(value: Any) -> str:
    """The digest an entry keeps of an output value."""
    if value is None:
        return ""
    return hashlib.md5(values.dumps(value), usedforsecurity=False).hexdigest()


def save(backend: Backend, entry: Entry, data: bytes | None = None,
         max_age_s: float | None = None, *, replace_any: bool = False) -> bool:
    """Store ``entry`` unless its key holds a usable entry already (the first writer
    wins); an entry there that is corrupt, or older than ``max_age_s``, is replaced.
    ``data`` (the canonical output bytes) goes to output storage, under a name of this
    writer's own, when the record would not hold it. ``replace_any`` replaces even a
    usable entry (a refresh). True if stored."""
    comps = entry.components
    if len(json.dumps(comps)) > MAX_COMPONENT_BYTES:
        comps = {**comps, "inputs": {"*": hashlib.sha256(json.dumps(
            comps.get("inputs"), sort_keys=True).encode()).hexdigest()[:32]}}
        entry = replace(entry, components=comps)
    if data is not None and (len(data) > INLINE_BYTES or _record_bytes(entry) > RECORD_BYTES):
        name = object_name(entry.key, entry.workflow_id, entry.task, entry.attempt)
        entry = replace(entry, output=None,
                        ref=OutputRef(name, backend.outputs.put(name, data), len(data)))
    # a max_age below zero makes any entry there too old to keep
    if not _put_first(backend, entry, -1.0 if replace_any else max_age_s):
        if entry.ref is not None:  # the winner's object is its own: drop this one
            backend.outputs.delete(entry.ref.name)
        return False
    backend.records.put(task_partition(entry.workflow),
                        f"{entry.task}/{round(entry.created_at * 1000):013d}",
                        {"key": entry.key, "components": comps})
    return True


def _record_bytes(entry: Entry) -> int:
    """The size of ``entry``'s record the way Azure Table Storage counts it (UTF-16)."""
    return utf16_bytes(json.dumps(entry.to_json(), sort_keys=True))


def _put_first(backend: Backend, entry: Entry, max_age_s: float | None) -> bool:
    """Create the record, or replace one that is not usable (under its ETag)."""
    try:
        backend.records.put(PARTITION, entry.key, entry.to_json(), etag="*new")
        return True
    except AlreadyExists:
        pass
    try:
        raw, etag = backend.records.get(PARTITION, entry.key)
    except NotFound:
        return False
    if lookup(backend, entry.key, entry.created_at, max_age_s) is not None:
        return False  # a usable entry is there: it stays
    try:
        backend.records.put(PARTITION, entry.key, entry.to_json(), etag=etag)
    except (PreconditionFailed, NotFound):
        return False
    old = raw.get("ref") if isinstance(raw, dict) else None
    if isinstance(old, list) and old and isinstance(old[0], str) and (
            entry.ref is None or old[0] != entry.ref.name):
        backend.outputs.delete(old[0])  # the replaced entry's own object
    return True


def lookup(backend: Backend, key: str, now: float, max_age_s: float | None) -> Entry | None:
    """The usable entry of ``key``: present, young enough and verified; else None (a
    corrupt entry is logged and treated as absent)."""
    try:
        raw, _ = backend.records.get(PARTITION, key)
    except NotFound:
        return None
    try:
        entry = Entry.from_json(raw)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        log.warning("cache entry %s is malformed (%s); running the task instead", key, exc)
        return None
    if max_age_s is not None and now - entry.created_at > max_age_s:
        return None
    try:
        if entry.ref is not None:
            data = fetch_verified(backend, entry.ref)
            got = hashlib.md5(data, usedforsecurity=False).hexdigest()
            entry = replace(entry, data=data)
        else:
            got = output_digest(entry.output)
    except (DagqError, NotFound) as exc:
        log.warning("cache entry %s cannot be used (%s); running the task instead", key, exc)
        return None
    if got != entry.digest:
        log.warning("cache entry %s does not match its digest; running the task instead", key)
        return None
    if entry.synced and synced_manifest(backend, entry.synced["prefixes"])[1] != \
            entry.synced.get("digest"):
        log.warning("cache entry %s: the files its task synced are gone or changed; running "
                    "the task instead", key)
        return None
    return entry


def synced_manifest(backend: Backend, prefixes: list[str]) -> tuple[int, str]:
    """How many objects lie under ``prefixes`` and a digest of their names (relative to
    their prefix) and MD5s."""
    rows = sorted((k, name[len(prefix):], md5) for k, prefix in enumerate(prefixes)
                  for name, _size, md5 in backend.outputs.list(prefix))
    return len(rows), hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:32]


def copy_synced(backend: Backend, entry: Entry, prefixes: list[str]) -> int:
    """Copy the files ``entry``'s task synced into ``prefixes`` (the new run's, in the
    same order); how many objects were copied."""
    if not entry.synced:
        return 0
    copied = 0
    for src, dst in zip(entry.synced["prefixes"], prefixes, strict=False):
        for name, _size, md5 in backend.outputs.list(src):
            data = backend.outputs.get(name)
            if hashlib.md5(data, usedforsecurity=False).hexdigest() != md5:
                raise DagqError(f"synced file {name} changed while it was copied")
            backend.outputs.put(dst + name[len(src):], data)
            copied += 1
    return copied


def entries(backend: Backend) -> list[Entry]:
    """Every readable entry, oldest first."""
    out = []
    for _, raw in backend.records.list(PARTITION):
        try:
            out.append(Entry.from_json(raw))
        except (KeyError, TypeError, ValueError, IndexError):
            continue
    return sorted(out, key=lambda e: e.created_at)


def latest_components(backend: Backend, workflow: str) -> dict[str, dict[str, Any]]:
    """Per task of workflows named ``workflow``: the components of its newest entry."""
    out: dict[str, dict[str, Any]] = {}
    for key, raw in backend.records.list(task_partition(workflow)):
        task = key.rsplit("/", 1)[0]
        out[task] = dict(raw.get("components") or {})
    return out


def delete(backend: Backend, entry: Entry) -> None:
    """Remove one entry, its stored output and its pointer."""
    if entry.ref is not None:
        backend.outputs.delete(entry.ref.name)
    backend.records.delete(PARTITION, entry.key)
    backend.records.delete(task_partition(entry.workflow),
                           f"{entry.task}/{round(entry.created_at * 1000):013d}")


def remember(backend: Backend, task: TaskMessage, done: CompletionMessage,
             now: float, synced: list[str] | None = None) -> None:
    """Store the result of a successful attempt of a task that uses the cache (the task
    message carries its key), with a manifest of what it synced under ``synced`` (object
    prefixes). A failure to store is logged: the attempt stands."""
    info = task.cache
    if info is None or not done.success or done.cached:
        return
    try:
        output = done.output
        if done.output_ref is not None:
            data: bytes | None = fetch_verified(backend, done.output_ref)
            digest = done.output_ref.md5
            assert data is not None
            output = values.loads(data) if len(data) <= INLINE_BYTES else None
        else:
            data = values.dumps(done.output) if done.output is not None else None
            digest = output_digest(done.output)
        files = None
        if synced:
            count, manifest = synced_manifest(backend, synced)
            if count:
                files = {"prefixes": synced, "files": count, "digest": manifest}
        entry = Entry(str(info["key"]), task.task, str(info.get("workflow", "")),
                      task.workflow_id, task.attempt, now, digest, output, None,
                      dict(info.get("components") or {}), files)
        age = info.get("max_age_s")
        save(backend, entry, data, float(age) if isinstance(age, int | float) else None,
             replace_any=info.get("refresh") is True)
    except (DagqError, OSError, KeyError, TypeError, ValueError) as exc:
        log.warning("%s: the result could not be stored in the cache (%s); a later run "
                    "will compute it again", task.key, exc)

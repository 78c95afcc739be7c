"""Binary form of a ``WorkflowState``: ``dumps`` and ``loads``, versioned and compressed.

Layout (format version 2)::

    b"DQST"  version:u16  def_len:u32  zlib(definition JSON)  zlib(runtime JSON)  deltas

The deltas (``journal``) are what writes since the snapshot changed; version 1 had none,
and a version-1 reader would ignore them, so snapshots are written as version 2.

The definition never changes during a run, so its compressed form is computed once per
state and reused by every later ``dumps``; ``loads`` keeps the last few decoded
definitions (and their compiled graphs) keyed by those bytes, so re-reading a state of
the same run skips rebuilding them. The runtime JSON is columnar: one list per task
field (dense for small numbers, ``{"i": indexes, "v": values}`` for mostly-empty ones),
task statuses as one string of digits, and times in milliseconds since ``created_at``.
"""

from __future__ import annotations

import functools
import json
import zlib
from typing import Any

from dagq.core.engine.defcodec import compact_json, def_from_json, def_to_json, dense, sparse
from dagq.core.engine.graph import STATUS_NAMES, Graph
from dagq.core.engine.state import WorkflowState
from dagq.core.engine.types import (
    ChildSubmit,
    Dispatch,
    NotifyEvent,
    OutboxEntry,
    ParentLink,
    ParentNotice,
)
from dagq.core.model import WORKFLOW_STATUSES, OutputRef, WorkflowDef

FORMAT_VERSION = 2
"""Version of the serialised layout; ``loads`` refuses newer versions."""

MAGIC = b"DQST"
_HEADER = 10
_TO_DIGITS = bytes.maketrans(bytes(range(10)), b"0123456789")
_FROM_DIGITS = bytes.maketrans(b"0123456789", bytes(range(10)))


def encode_state(s: WorkflowState) -> bytes:
    """Serialise ``s`` (see the module docstring for the layout). The runtime document is
    encoded and compressed one column (and 1,000 outbox entries) at a time, so a large
    state is never held as one JSON text."""
    if s.def_blob is None:
        text = compact_json(def_to_json(s.definition))
        s.def_blob = zlib.compress(text.encode(), 6)
    base = s.created_at
    index = s.graph.index
    columns: list[tuple[str, Any]] = [
        ("id", s.workflow_id), ("status", s.status),
        ("created_at", s.created_at), ("updated_at", s.updated_at),
        ("parent", [s.parent.workflow_id, s.parent.task, s.parent.attempt] if s.parent else None),
        ("cancel", s.cancel_requested), ("retry_ids", s.retry_ids), ("notices", s.notices_sent),
        ("maps", [[h, items] for h, items in s.maps.items()]),
        ("susp", s.suspended), ("creason", s.cancel_reason),
        ("st", s.st.translate(_TO_DIGITS).decode("ascii")),
        ("att", s.attempt), ("rs", lambda: sparse(s.round_start, 1)),
        ("rel", lambda: sparse(s.releases, 0)), ("out", lambda: sparse(s.output, None)),
        ("ref", lambda: sparse([[r.name, r.md5, r.size] if r else None for r in s.output_ref],
                               None)),
        ("err", lambda: sparse(s.error, None)), ("note", lambda: sparse(s.note, None)),
        ("disp", lambda: _times(s.dispatched_at, base)),
        ("dly", lambda: sparse(s.delay_used, 0.0)),
        ("fin", lambda: _times(s.finished_at, base)),
        ("stop", lambda: [i for i, flag in enumerate(s.stopping) if flag]),
        ("held", lambda: list(s.held)),
    ]
    if s.events_sent:  # only a run with hooks has events
        columns.append(("events", s.events_sent))
    z = zlib.compressobj(6)
    parts = [b""]
    for k, (key, value) in enumerate(columns):
        value = value() if callable(value) else value
        parts.append(z.compress(f'{"{" if k == 0 else ","}"{key}":{_json(value)}'.encode()))
    entries = list(s.outbox.values())
    parts.append(z.compress(b',"outbox":['))
    for at in range(0, len(entries), 1000):
        chunk = [entry_to_json(e, index, base) for e in entries[at:at + 1000]]
        parts.append(z.compress((b"," if at else b"") + _json(chunk)[1:-1].encode()))
    parts.append(z.compress(b"]}") + z.flush())
    header = MAGIC + FORMAT_VERSION.to_bytes(2, "big") + len(s.def_blob).to_bytes(4, "big")
    parts[0] = header + s.def_blob
    return b"".join(parts)


def _times(values: list[float | None], base: float) -> list[int | None]:
    """Times as milliseconds since ``base`` (None stays None)."""
    if values.count(None) == len(values):  # a new state: nothing dispatched or finished yet
        return [None] * len(values)
    return [None if t is None else round((t - base) * 1000) for t in values]


def _json(value: Any) -> str:
    return compact_json(value)


def decode_snapshot(data: bytes) -> tuple[WorkflowState, int]:
    """The state of the snapshot at the start of ``data`` (aggregates not yet rebuilt)
    and where the snapshot ends (the deltas after it are ``journal``'s)."""
    if len(data) < _HEADER or data[:4] != MAGIC:
        raise ValueError("not a dagq workflow state (missing header); was it written by dagq?")
    version = int.from_bytes(data[4:6], "big")
    if version > FORMAT_VERSION:
        raise ValueError(f"workflow state format version {version} is newer than this dagq "
                         f"supports ({FORMAT_VERSION}); upgrade dagq to read it")
    end = _HEADER + int.from_bytes(data[6:10], "big")
    blob = bytes(data[_HEADER:end])
    try:
        defn, graph = _definition(blob)
        runtime = zlib.decompressobj()
        doc = json.loads(runtime.decompress(data[end:]))
        if not runtime.eof:
            raise ValueError("the runtime part is cut short")
        return _build(doc, defn, graph, blob), len(data) - len(runtime.unused_data)
    except (zlib.error, ValueError, KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"workflow state is corrupt: {type(exc).__name__}: {exc}") from None


def clear_definition_cache() -> None:
    """Forget the decoded definitions kept by ``decode_state`` (for benchmarks and tests)."""
    _definition.cache_clear()


@functools.lru_cache(maxsize=8)
def _definition(blob: bytes) -> tuple[WorkflowDef, Graph]:
    defn = def_from_json(json.loads(zlib.decompress(blob)), lazy=True)
    graph = Graph(defn, check_cycles=False)
    share = getattr(defn.tasks, "share", None)
    if share is not None:
        share(graph.index, graph.deps)
    return defn, graph


def _build(doc: dict[str, Any], defn: WorkflowDef, graph: Graph, blob: bytes) -> WorkflowState:
    base: float = doc["created_at"]
    p = doc["parent"]
    s = WorkflowState(defn, doc["id"], base, ParentLink(p[0], p[1], p[2]) if p else None, graph)
    s.def_blob = blob
    for h, items in doc.get("maps", ()):
        if h not in s.graph.maps or h in s.maps or not isinstance(items, list):
            raise ValueError(f"bad expansion record for task {h!r}")
        s.expand(h, items)
    graph = s.graph
    n = len(graph.names)
    if doc["status"] not in WORKFLOW_STATUSES or len(doc["st"]) != n:
        raise ValueError(f"bad workflow status {doc['status']!r} or task count")
    s.status, s.updated_at = doc["status"], doc["updated_at"]
    s.cancel_requested, s.retry_ids = doc["cancel"], doc["retry_ids"]
    s.suspended, s.cancel_reason = bool(doc.get("susp")), doc.get("creason")
    s.notices_sent = doc["notices"]
    s.events_sent = doc.get("events", 0)
    s.st = bytearray(doc["st"].encode("ascii").translate(_FROM_DIGITS))
    if max(s.st, default=0) >= len(STATUS_NAMES):
        raise ValueError("unknown task status code")
    s.attempt = doc["att"]
    s.round_start = dense(doc["rs"], n, 1)
    s.releases = dense(doc["rel"], n, 0)
    s.output = dense(doc["out"], n, None)
    s.output_ref = [None if r is None else OutputRef(r[0], r[1], r[2])
                    for r in dense(doc["ref"], n, None)]
    s.error = dense(doc["err"], n, None)
    s.note = dense(doc["note"], n, None)
    s.dispatched_at = [None if t is None else base + t / 1000 for t in doc["disp"]]
    s.delay_used = dense(doc["dly"], n, 0.0)
    s.finished_at = [None if t is None else base + t / 1000 for t in doc["fin"]]
    for i in doc["stop"]:
        s.stopping[i] = 1
    s.held.extend(doc["held"])
    for row in doc["outbox"]:
        entry = entry_from_json(row, graph, base)
        s.outbox[entry.key] = entry
    return s


def entry_to_json(e: OutboxEntry, index: dict[str, int], base: float) -> list[Any]:
    p = e.payload
    at = round((e.written_at - base) * 1000)
    if isinstance(p, Dispatch):
        return ["d", p.key, at, index[p.task], p.attempt, p.delay_s]
    if isinstance(p, ChildSubmit):
        return ["c", p.key, at, index[p.task], p.attempt, p.delay_s, p.child_id]
    if isinstance(p, NotifyEvent):
        return ["e", p.key, at, p.status, p.number, p.counts, [list(f) for f in p.failed],
                p.failed_total]
    return ["n", p.key, at, p.parent_id, p.task, p.attempt, p.success, p.error]


def entry_from_json(row: list[Any], g: Graph, base: float) -> OutboxEntry:
    kind, key, at = row[0], row[1], base + row[2] / 1000
    if kind == "d":
        i = row[3]
        return OutboxEntry("dispatch", Dispatch(key, g.names[i], row[4], g.queue[i], row[5],
                                                g.timeout[i]), at)
    if kind == "c":
        return OutboxEntry("child", ChildSubmit(key, g.names[row[3]], row[4], row[6], row[5]), at)
    if kind == "n":
        return OutboxEntry("notice", ParentNotice(row[3], row[4], row[5], row[6], row[7], key), at)
    if kind == "e":
        failed = tuple((f[0], f[1], f[2]) for f in row[6])
        return OutboxEntry("notify", NotifyEvent(key, row[3], row[4], row[5], failed, row[7]),
                           at)
    raise ValueError(f"unknown outbox entry kind {kind!r}")

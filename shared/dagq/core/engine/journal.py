"""Deltas of a ``WorkflowState``: what one write changed, so a write costs what changed.

A stored state is a snapshot (``codec``) followed by zero or more deltas, each framed as::

    b"DQJ1"  length:u32  zlib(delta JSON)

A delta carries the workflow's scalar fields (status, times, cancel and retry records),
one row per task whose columns changed since the last write (``WorkflowState.dirty``),
the outbox entries added and the keys removed, and how ``held`` moved (tasks taken from
its left, tasks appended; or the whole list after a cancel cleared it). Replaying the
deltas in order over the snapshot gives exactly the state that was written last.

``encode_write`` decides per write whether a delta or a new snapshot (a compaction) is
written: a delta while the deltas stay smaller in total than the snapshot and fewer than
the store allows, so reading a state costs at most about twice its snapshot and the
bytes written per completion stay proportional to what each completion changed.
"""

from __future__ import annotations

import itertools
import json
import zlib
from typing import Any

from dagq.core.engine.codec import decode_snapshot, encode_state, entry_from_json, entry_to_json
from dagq.core.engine.state import WorkflowState
from dagq.core.model import OutputRef

MAGIC = b"DQJ1"
"""Marks a delta frame."""
FRAME_HEADER = 8
MIN_SNAPSHOT_BYTES = 4096
"""A state whose snapshot is smaller is rewritten whole (unless it has ``min_tasks``
tasks): a delta would save few bytes. Bytes alone undercount the CPU a snapshot costs: a
600-task fan-out compresses to 3 KB, but encoding it takes about 0.9 µs per task."""


def dumps(s: WorkflowState) -> bytes:
    """A full snapshot of ``s``; ``s`` counts as stored in that form from now on."""
    data = encode_state(s)
    mark_stored(s, len(data))
    return data


def loads(data: bytes) -> WorkflowState:
    """The state a snapshot and the deltas after it describe; O(tasks + edges + deltas).
    Raises ``ValueError`` for bytes that are not a dagq state or are newer than we read."""
    s, end = decode_snapshot(data)
    try:
        docs = split_frames(data, end)
        for doc in docs:
            _apply(s, json.loads(doc))
    except (zlib.error, ValueError, KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"workflow state journal is corrupt: {type(exc).__name__}: "
                         f"{exc}") from None
    s.rebuild()
    mark_stored(s, end)
    s.journal_bytes, s.journal_entries = len(data) - end, len(docs)
    return s


def encode_write(s: WorkflowState, max_entries: int, min_bytes: int = MIN_SNAPSHOT_BYTES,
                 min_tasks: int = 0) -> tuple[str, bytes]:
    """What the next write of ``s`` stores: ``("append", delta)`` or ``("replace",
    snapshot)``; deltas only once the snapshot has ``min_bytes`` or (``min_tasks`` > 0)
    the state ``min_tasks`` tasks. Call ``mark_stored`` once the write succeeded; a failed
    write must drop ``s``: its change records no longer match the store."""
    if ((s.snapshot_bytes >= min_bytes or 0 < min_tasks <= len(s.st))
            and s.journal_entries < max_entries
            and s.journal_bytes < s.snapshot_bytes
            and len(s.dirty) < len(s.st) // 4):  # else a delta would rival the snapshot
        delta = encode_delta(s)
        if s.journal_bytes + len(delta) <= s.snapshot_bytes:
            return "append", delta
    return "replace", encode_state(s)


def encode_delta(s: WorkflowState) -> bytes:
    """One framed delta of everything ``s`` changed since it was last stored or read
    (encoded and compressed a thousand items at a time: a delta may be large too)."""
    index, base = s.graph.index, s.created_at
    head: dict[str, Any] = {
        "status": s.status, "updated_at": s.updated_at, "cancel": s.cancel_requested,
        "retry_ids": s.retry_ids, "notices": s.notices_sent, "susp": s.suspended,
        "creason": s.cancel_reason}
    if s.events_sent:
        head["events"] = s.events_sent
    if s.maps_new:
        head["maps"] = [[h, s.maps[h]] for h in s.maps_new]
    if s.held_reset:
        head["held"] = list(s.held)
    else:
        head["hp"], head["ha"] = s.held_popped, s.held_pushed
    z = zlib.compressobj(6)
    parts = [z.compress(_json(head)[:-1].encode())]
    added = (e for k, e in s.outbox.items() if k not in s.outbox_base)
    lists = (("rows", (_row(s, i) for i in sorted(s.dirty))),
             ("ob+", (entry_to_json(e, index, base) for e in added)),
             ("ob-", iter(sorted(s.outbox_base.difference(s.outbox)))))
    for name, items in lists:
        parts.append(z.compress(f',"{name}":['.encode()))
        first = True
        while chunk := list(itertools.islice(items, 1000)):
            parts.append(z.compress(("" if first else ",").encode() + _json(chunk)[1:-1].encode()))
            first = False
        parts.append(z.compress(b"]"))
    parts.append(z.compress(b"}") + z.flush())
    body = b"".join(parts)
    return MAGIC + len(body).to_bytes(4, "big") + body


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def mark_stored(s: WorkflowState, snapshot_bytes: int | None, delta_bytes: int = 0) -> None:
    """Forget the change records: ``s`` is as stored now. A new snapshot gives its size
    (the journal restarts empty); an appended delta gives ``None`` and the delta's size."""
    if snapshot_bytes is not None:
        s.snapshot_bytes, s.journal_bytes, s.journal_entries = snapshot_bytes, 0, 0
    else:
        s.journal_bytes += delta_bytes
        s.journal_entries += 1
    s.dirty.clear()
    s.held_popped, s.held_pushed, s.held_reset = 0, [], False
    s.outbox_base = set(s.outbox)
    s.maps_new = []


def split_frames(data: bytes, start: int = 0) -> list[bytes]:
    """The delta documents (decompressed JSON bytes) framed in ``data[start:]``."""
    out: list[bytes] = []
    at = start
    while at < len(data):
        if data[at:at + 4] != MAGIC or len(data) < at + FRAME_HEADER:
            raise ValueError(f"bad delta frame at byte {at}")
        end = at + FRAME_HEADER + int.from_bytes(data[at + 4:at + FRAME_HEADER], "big")
        if end > len(data):
            raise ValueError(f"the delta frame at byte {at} is cut short")
        out.append(zlib.decompress(data[at + FRAME_HEADER:end]))
        at = end
    return out


def _ms(s: WorkflowState, t: float | None) -> int | None:
    return None if t is None else round((t - s.created_at) * 1000)


def _row(s: WorkflowState, i: int) -> list[Any]:
    ref = s.output_ref[i]
    return [i, s.st[i], s.attempt[i], s.round_start[i], s.releases[i], s.output[i],
            [ref.name, ref.md5, ref.size] if ref else None, s.error[i], s.note[i],
            _ms(s, s.dispatched_at[i]), s.delay_used[i], _ms(s, s.finished_at[i]),
            s.stopping[i]]


def _apply(s: WorkflowState, doc: dict[str, Any]) -> None:
    s.status, s.updated_at = doc["status"], doc["updated_at"]
    s.cancel_requested, s.retry_ids = doc["cancel"], doc["retry_ids"]
    s.suspended, s.cancel_reason = bool(doc.get("susp")), doc.get("creason")
    s.notices_sent = doc["notices"]
    s.events_sent = doc.get("events", s.events_sent)
    base = s.created_at
    for h, items in doc.get("maps", ()):
        if h not in s.graph.maps or h in s.maps or not isinstance(items, list):
            raise ValueError(f"bad expansion record for task {h!r}")
        s.expand(h, items)
    for (i, st, att, rs, rel, out, ref, err, note, disp, dly, fin, stop) in doc["rows"]:
        s.st[i], s.attempt[i], s.round_start[i], s.releases[i] = st, att, rs, rel
        s.output[i] = out
        s.output_ref[i] = None if ref is None else OutputRef(ref[0], ref[1], ref[2])
        s.error[i], s.note[i], s.delay_used[i], s.stopping[i] = err, note, dly, stop
        s.dispatched_at[i] = None if disp is None else base + disp / 1000
        s.finished_at[i] = None if fin is None else base + fin / 1000
    for key in doc["ob-"]:
        s.outbox.pop(key, None)
    for row in doc["ob+"]:
        e = entry_from_json(row, s.graph, base)
        s.outbox[e.key] = e
    if "held" in doc:
        s.held.clear()
        s.held.extend(doc["held"])
    else:
        s.held.extend(doc["ha"])
        for _ in range(doc["hp"]):
            s.held.popleft()

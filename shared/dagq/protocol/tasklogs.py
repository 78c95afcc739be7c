"""Stored task logs: object names and reading an attempt's log back by byte offset.

A worker stores what an attempt printed (stdout and stderr combined) as a sequence of
objects in the output store (see ``dagq.worker.logcapture``)::

    logs/{workflow_id}/{task}/{attempt}/{run}-{seq:06d}.log   the head, in order
    logs/{workflow_id}/{task}/{attempt}/{run}-tail.log        the tail (only when capped)

``run`` tells apart the runs of one attempt: a released attempt (e.g. after a
preemption) runs again with the same number. It is the run's start time in epoch
milliseconds, so runs sort in the order they started and two workers running the same
attempt at once never write the same objects. The stored log of an attempt is every
run's chunks, then its tail, run after run; offsets are positions in that sequence, so a
reader can follow a running attempt by asking for what lies past its last offset. The
tail of a running attempt is rewritten while it runs, so a follower leaves out the
last run's tail until the attempt has ended (``open_tail=False``) and reads it then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dagq.errors import NotFound
from dagq.ports import OutputStore

_TAIL_SEQ = 1 << 30
_PART_RE = re.compile(r"(\d+)-(\d{6}|tail)\.log")


def log_prefix(workflow_id: str, task: str, attempt: int) -> str:
    """The name prefix of every stored object of one attempt's log."""
    return f"logs/{workflow_id}/{task}/{attempt}/"


def log_object_name(workflow_id: str, task: str, attempt: int, run: int,
                    seq: int | None) -> str:
    """The name of one chunk (``seq``) or of the tail (``seq=None``) of a run's log."""
    part = "tail" if seq is None else f"{seq:06d}"
    return f"{log_prefix(workflow_id, task, attempt)}{run:013d}-{part}.log"


@dataclass(frozen=True)
class LogPart:
    """One stored object of an attempt's log."""

    name: str
    """Object name in the output store."""
    size: int
    """Bytes."""
    start: int
    """Offset of its first byte in the attempt's log."""
    tail: bool = False
    """True for a run's tail object (rewritten while that run is running)."""


def log_parts(outputs: OutputStore, workflow_id: str, task: str, attempt: int,
              open_tail: bool = True) -> list[LogPart]:
    """The stored objects of an attempt's log in reading order (empty if none); without
    ``open_tail`` the last run's tail is left out (it may still change)."""
    prefix = log_prefix(workflow_id, task, attempt)
    found: list[tuple[tuple[int, int], str, int]] = []
    for name, size, _md5 in outputs.list(prefix):
        m = _PART_RE.fullmatch(name[len(prefix):])
        if m is None:  # e.g. a task whose name continues with "/{attempt}/..."
            continue
        seq = _TAIL_SEQ if m.group(2) == "tail" else int(m.group(2))
        found.append(((int(m.group(1)), seq), name, size))
    found.sort()
    if not open_tail and found and found[-1][0][1] == _TAIL_SEQ:
        found.pop()
    parts, offset = [], 0
    for key, name, size in found:
        parts.append(LogPart(name, size, offset, key[1] == _TAIL_SEQ))
        offset += size
    return parts


def read_log(outputs: OutputStore, workflow_id: str, task: str, attempt: int,
             offset: int = 0, limit: int | None = None,
             open_tail: bool = True) -> tuple[bytes, int]:
    """The attempt's stored log from ``offset`` (at most ``limit`` bytes) and the offset
    to ask for next. Bytes appear in the store as the worker uploads them."""
    out = bytearray()
    end = offset
    for part in log_parts(outputs, workflow_id, task, attempt, open_tail):
        if part.start + part.size <= offset:
            continue
        if limit is not None and len(out) >= limit:
            break
        try:
            data = outputs.get(part.name)
        except NotFound:  # replaced (a tail being rewritten) between list and get
            break
        piece = data[max(0, offset - part.start):]
        if limit is not None:
            piece = piece[:limit - len(out)]
        out += piece
        end = max(offset, part.start) + len(piece)
    return bytes(out), end


def last_lines(data: bytes, n: int) -> bytes:
    """The last ``n`` lines of ``data``."""
    if n <= 0:
        return b""
    lines = data.splitlines(keepends=True)
    return b"".join(lines[-n:])

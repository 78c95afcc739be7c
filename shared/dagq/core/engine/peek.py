"""Attempt facts read straight from stored state bytes, without building the state.

A worker asks one question of a stored state before it starts an attempt: is this attempt
still the current one, and is a cancel waiting for it? Answering it with ``loads`` would
rebuild the whole definition and graph (seconds and ~1 KB per task at 100,000 tasks).
``peek`` reads only the per-task status, attempt, release and stop columns from the
snapshot and its deltas; the task names are decoded once per distinct definition. Given
the facts of an earlier read of the same state, it replays only the deltas appended
since (the bytes read before are recognised by their digest), so a worker that checks
a large workflow every second pays for what changed, not for the whole state.
"""

from __future__ import annotations

import functools
import hashlib
import json
import zlib
from dataclasses import dataclass

from dagq.core.engine.codec import FORMAT_VERSION, MAGIC
from dagq.core.engine.defcodec import dense
from dagq.core.engine.graph import RUNNING
from dagq.core.engine.journal import split_frames
from dagq.core.mapping import instance_name

_HEADER = 10


@dataclass(frozen=True)
class Facts:
    """What a stored state says about every task's current attempt."""

    index: dict[str, int]
    """Task name -> task id."""
    status: bytes
    """Status code per task id."""
    attempt: list[int]
    """Current attempt number per task id."""
    releases: list[int]
    """Re-dispatches of the current attempt after a release, per task id."""
    stopping: set[int]
    """Tasks whose running attempt a cancel waits for."""
    consumed: int = 0
    """How many bytes of the stored state these facts were read from."""
    digest: bytes = b""
    """Digest of those bytes (a later read that starts with them only adds deltas)."""

    def judge(self, task: str, attempt: int, key: str) -> str:
        """``engine.judge_attempt`` over these facts."""
        i = self.index.get(task)
        if i is None:
            return "unknown"
        return judge(self.status[i], self.attempt[i], self.releases[i], i in self.stopping,
                     attempt, key)

    def running(self, task: str) -> int | None:
        """The attempt ``task`` is running, or None (not running, or no such task)."""
        i = self.index.get(task)
        return self.attempt[i] if i is not None and self.status[i] == RUNNING else None


def judge(code: int, current: int, releases: int, stopping: bool, attempt: int,
          key: str) -> str:
    """``"run"``, ``"cancelled"``, ``"ended"`` or ``"unknown"`` for a delivered attempt
    (``attempt``, dispatch ``key``) of a task in status ``code`` whose current attempt
    is ``current`` after ``releases`` re-dispatches."""
    tail = key.rpartition("/")[2].partition(".")[2]
    delivered = (attempt, int(tail) if tail.isdigit() else 0)
    if delivered > (current, releases):
        return "unknown"
    if delivered < (current, releases) or code != RUNNING:
        return "ended"
    return "cancelled" if stopping else "run"


def peek(data: bytes, previous: Facts | None = None) -> Facts:
    """The attempt facts of the state stored as ``data``; ``ValueError`` if corrupt.
    With ``previous`` (facts of an earlier read of the same workflow), a ``data`` that
    extends the bytes it was read from costs only the deltas appended since."""
    if len(data) < _HEADER or data[:4] != MAGIC:
        raise ValueError("not a dagq workflow state (missing header); was it written by dagq?")
    if int.from_bytes(data[4:6], "big") > FORMAT_VERSION:
        raise ValueError("workflow state format is newer than this dagq supports")
    try:
        if (previous is not None and 0 < previous.consumed <= len(data)
                and _digest(data, previous.consumed) == previous.digest):
            index, start = previous.index, previous.consumed
            status, attempt = bytearray(previous.status), list(previous.attempt)
            releases, stopping = list(previous.releases), set(previous.stopping)
        else:
            end = _HEADER + int.from_bytes(data[6:10], "big")
            index = _names(bytes(data[_HEADER:end]))
            runtime = zlib.decompressobj()
            doc = json.loads(runtime.decompress(data[end:]))
            status = bytearray(doc["st"].encode("ascii").translate(_FROM_DIGITS))
            n = len(status)
            if doc.get("maps"):
                index = _expanded(dict(index), doc["maps"], _heads(index))
            attempt, releases = doc["att"], dense(doc["rel"], n, 0)
            stopping = set(doc["stop"])
            start = len(data) - len(runtime.unused_data)
        for frame in split_frames(data, start):
            delta = json.loads(frame)
            if delta.get("maps"):
                index = _expanded(dict(index), delta["maps"], _heads(index))
                grown = len(index) - len(status)
                status.extend(bytes(grown))
                attempt.extend([0] * grown)
                releases.extend([0] * grown)
            for row in delta["rows"]:
                i = row[0]
                status[i], attempt[i], releases[i] = row[1], row[2], row[4]
                if row[12]:
                    stopping.add(i)
                else:
                    stopping.discard(i)
    except (zlib.error, ValueError, KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"workflow state is corrupt: {type(exc).__name__}: {exc}") from None
    return Facts(index, bytes(status), attempt, releases, stopping, len(data),
                 _digest(data, len(data)))


def _heads(index: dict[str, int]) -> dict[int, str]:
    return {i: name for name, i in index.items()}


def _expanded(index: dict[str, int], maps: list[list[object]],
              names: dict[int, str]) -> dict[str, int]:
    """``index`` with the instances of the expansions ``maps`` (``[head, items]`` in
    order) after the tasks it has, named as ``dagq.core.mapping.instance_name``."""
    for h, items in maps:
        head = names[h]  # type: ignore[index]
        start = len(index)
        for j in range(len(items)):  # type: ignore[arg-type]
            index[instance_name(head, j)] = start + j
    return index


def _digest(data: bytes, n: int) -> bytes:
    return hashlib.blake2b(memoryview(data)[:n], digest_size=16).digest()


_FROM_DIGITS = bytes.maketrans(b"0123456789", bytes(range(10)))


@functools.lru_cache(maxsize=8)
def _names(blob: bytes) -> dict[str, int]:
    names: list[str] = json.loads(zlib.decompress(blob))["names"]
    return {name: i for i, name in enumerate(names)}

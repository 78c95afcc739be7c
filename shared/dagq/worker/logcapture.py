"""Log capture: streams the local log file of a running attempt into the output store.

A task process writes its combined stdout/stderr straight into a local file (the kernel
does the writing, so the worker's memory never holds the output). A capture thread
reads the file's new bytes every fraction of a second and:

- while the stored head is under its cap, uploads them as numbered chunks (one object
  per chunk of up to ``CHUNK_BYTES``, at least every ``flush_interval`` seconds);
- past the head cap, keeps only the last bytes in a bounded buffer and rewrites the tail
  object (preceded by a marker saying what was left out) every ``TAIL_EVERY_S`` seconds,
  so a lost worker loses at most that much of the end, and once more at the end;
- frees the disk blocks it has read (``fallocate`` hole punching, so the writer's file
  offset is untouched), keeping the last ``KEEP_LOCAL`` bytes for the error tail.

``finish()`` uploads the rest and deletes the local file. Local disk use is bounded by
the bytes not yet read, memory by ``CHUNK_BYTES`` plus the tail cap. Object names are
those of ``dagq.protocol.tasklogs``.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from dagq.ports import OutputStore
from dagq.protocol.tasklogs import log_object_name
from dagq.worker.pacer import Pacer

log = logging.getLogger("dagq.worker")

CHUNK_BYTES = 1024 * 1024
"""Largest chunk object (and largest single read)."""
KEEP_LOCAL = 64 * 1024
"""Bytes at the end of the local file never hole-punched (the error tail reads them)."""
POLL_S = 0.25
TAIL_EVERY_S = 30.0
"""Least seconds between rewrites of a running attempt's tail object (each rewrite
uploads the whole tail, so it is rarer than the head's chunks)."""
_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE = 0x01, 0x02


@dataclass(frozen=True)
class LogStats:
    """What a capture did."""

    printed: int
    """Bytes the attempt printed."""
    stored: int
    """Bytes stored (head chunks plus the tail object)."""
    truncated: bool
    """True if the middle was left out to respect the cap."""
    uploads: int
    """Objects written."""


class LogCapture:
    """Streams ``path`` (appended to by a task process) into ``outputs``."""

    def __init__(self, outputs: OutputStore, path: Path, workflow_id: str, task: str,
                 attempt: int, run: int, *, max_bytes: int, flush_interval: float) -> None:
        self.outputs, self.path = outputs, path
        self._names = (workflow_id, task, attempt, run)
        self.max_bytes = max_bytes
        self.head_cap = max_bytes // 2
        self.tail_cap = max_bytes - self.head_cap
        self.flush_interval = flush_interval
        self.offset = 0          # bytes of the file read so far
        self.head_stored = 0
        self.uploads = 0
        self._seq = 0
        self._tail = bytearray()  # the last bytes past the head, at most ``tail_cap``
        self._tail_dirty = False
        self._tail_stored = 0
        self._punched = 0
        self._last_flush = self._last_tail = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pacer: Pacer | None = None
        self._pending = -1  # the pacer's handle of a deferred start
        self._lock = threading.Lock()

    def start(self, pacer: Pacer | None = None) -> LogCapture:
        """Start the background thread now, or with ``pacer`` after the first poll
        interval (an attempt that ends sooner never starts one); returns ``self``."""
        if pacer is None:
            self._start_thread()
        else:
            self._pacer = pacer
            self._pending = pacer.call_later(POLL_S, self._start_thread)
        return self

    def _start_thread(self) -> None:
        with self._lock:
            if self._stop.is_set():  # finished before its deferred start
                return
            self._thread = threading.Thread(target=self._loop, name="dagq-logcapture",
                                            daemon=True)
            self._thread.start()

    def finish(self, trailer: str | None = None) -> LogStats:
        """Append ``trailer`` (a note from the worker), upload everything left, delete
        the local file and report. Never raises for a store error (it is logged)."""
        self._stop.set()
        if self._pacer is not None:
            self._pacer.cancel(self._pending)
        with self._lock:  # a deferred start either ran already or never will
            thread = self._thread
        if thread is not None:
            thread.join()
        if trailer:
            with open(self.path, "ab") as f:
                f.write(trailer.encode())
        with self._lock:
            self._pump(force=True)
        with contextlib.suppress(OSError):
            self.path.unlink()
        return LogStats(self.offset, self.head_stored + self._tail_stored,
                        self.offset > self.head_stored + len(self._tail), self.uploads)

    # -- internals -----------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            with self._lock:
                try:
                    self._pump(force=False)
                except Exception:  # a capture bug must never take the worker down
                    log.exception("log capture of %s failed", self.path)
                    return

    def _pump(self, force: bool) -> None:
        due = force or time.monotonic() - self._last_flush >= self.flush_interval
        try:
            size = os.stat(self.path).st_size
        except OSError:
            return
        if self.offset < size:  # else nothing new: not even an open
            with open(self.path, "rb") as f:
                if not self._read(f, size, due):
                    return
        tail_due = force or time.monotonic() - self._last_tail >= TAIL_EVERY_S
        if self._tail_dirty and tail_due and self._put(None, self._tail_bytes()):
            self._tail_dirty = False
            self._last_tail = time.monotonic()
        if due:
            self._last_flush = self._last_tail = time.monotonic()
        self._punch()

    def _read(self, f: BinaryIO, size: int, due: bool) -> bool:
        """Store the head and remember the tail of what ``f`` has up to ``size``; False
        if a store failed (retried on the next round)."""
        while self.offset < size and self.head_stored < self.head_cap:
            want = min(CHUNK_BYTES, self.head_cap - self.head_stored, size - self.offset)
            if want < CHUNK_BYTES and self.head_stored + want < self.head_cap and not due:
                break  # a partial chunk waits for the flush interval
            f.seek(self.offset)
            data = f.read(want)
            if not data or not self._put(self._seq, data):
                return False
            self._seq += 1
            self.offset += len(data)
            self.head_stored += len(data)
        while self.offset < size and self.head_stored >= self.head_cap:
            # past the head: keep a bounded tail in memory
            f.seek(self.offset)
            data = f.read(min(CHUNK_BYTES, size - self.offset))
            if not data:
                break
            self.offset += len(data)
            self._remember(data)
        return True

    def _remember(self, data: bytes) -> None:
        self._tail += data[-self.tail_cap:]
        del self._tail[:max(0, len(self._tail) - self.tail_cap)]
        self._tail_dirty = True

    def _tail_bytes(self) -> bytes:
        left_out = self.offset - self.head_stored - len(self._tail)
        if left_out <= 0:
            return bytes(self._tail)
        marker = (f"\n[dagq: {left_out} bytes left out here; an attempt's stored log keeps "
                  f"its first {self.head_cap} and last {self.tail_cap} bytes "
                  f"(DAGQ_LOG_MAX_BYTES={self.max_bytes})]\n").encode()
        return marker + self._tail

    def _put(self, seq: int | None, data: bytes) -> bool:
        name = log_object_name(*self._names, seq)
        try:
            self.outputs.put(name, data)
        except Exception as exc:  # retried on the next round; the task goes on
            log.warning("could not store log %s (will retry): %s", name, exc)
            return False
        self.uploads += 1
        if seq is None:
            self._tail_stored = len(data)
        return True

    def _punch(self) -> None:
        end = (self.offset - KEEP_LOCAL) // 4096 * 4096
        if end <= self._punched:
            return
        if punch_hole(self.path, self._punched, end - self._punched):
            self._punched = end


_LIBC: ctypes.CDLL | None = None


def punch_hole(path: Path, offset: int, length: int) -> bool:
    """Free the disk blocks of ``path[offset:offset+length]`` (reads then return zeros);
    False where the system or file system cannot (the file then keeps its blocks).

    ``FALLOC_FL_PUNCH_HOLE`` works on XFS, ext4, Btrfs and tmpfs (util-linux
    ``fallocate(1)`` manual, ``--punch-hole``)."""
    global _LIBC
    try:
        if _LIBC is None:
            _LIBC = ctypes.CDLL(None, use_errno=True)
            _LIBC.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong,
                                        ctypes.c_longlong]
        fd = os.open(path, os.O_WRONLY)
    except (OSError, AttributeError):
        return False
    try:
        mode = _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE
        return int(_LIBC.fallocate(fd, mode, offset, length)) == 0
    finally:
        os.close(fd)

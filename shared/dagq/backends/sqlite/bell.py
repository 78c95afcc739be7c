"""A doorbell per queue of the embedded store, so that a waiting receiver wakes when a
message is sent instead of at its next poll.

Every process on one database file shares a named pipe per queue, in a folder beside the
file (``{db}-bells/``, one pipe per queue, named by a digest of the queue name). A sender
writes one byte after its send has committed; a receiver with nothing to take waits in
``poll`` on the pipe for at most its poll interval, then reads what is there. Each
process opens the pipe for reading *and* writing, so opening never blocks or fails for
want of the other side, and a full pipe (nobody reading) only makes further rings no-ops.

The bell only shortens waits: a ring that nobody hears, or one that another receiver
drains first, leaves a receiver to its poll, as before; where named pipes cannot be made
(no ``os.mkfifo``, a read-only folder, an in-memory database) receivers simply poll.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import select
import stat
import threading
import time
from pathlib import Path


def bells_dir(db_path: Path) -> Path:
    """The folder of the doorbells of the database at ``db_path``."""
    return db_path.with_name(db_path.name + "-bells")


class Bell:
    """The doorbell of one queue: ``ring`` after a send, ``wait`` instead of sleeping."""

    def __init__(self, folder: Path | None, queue: str) -> None:
        digest = hashlib.sha256(queue.encode()).hexdigest()[:24]
        self.path = None if folder is None else folder / digest
        self._fd: int | None = None
        self._tried = False
        self._lock = threading.Lock()

    def ring(self) -> None:
        """Wake the receivers waiting on this queue (best effort, never blocks)."""
        fd = self.open()
        if fd is not None:
            with contextlib.suppress(OSError):  # full (EAGAIN): a ring is pending anyway
                os.write(fd, b"\0")

    def wait(self, timeout_s: float) -> None:
        """Return after ``timeout_s`` seconds, or sooner if the bell rings."""
        fd = self.open()
        if fd is None:
            time.sleep(timeout_s)
            return
        watch = select.poll()  # one per wait: a poll object refuses concurrent use
        watch.register(fd, select.POLLIN)  # (``select`` refuses descriptors over 1,023)
        try:
            if watch.poll(max(0, math.ceil(timeout_s * 1000))):  # ms, never a spin
                os.read(fd, 4096)
        except BlockingIOError:  # another thread of this process read the ring first
            pass
        except OSError:  # closed meanwhile (the backend closed): wait as if polling
            time.sleep(timeout_s)

    def open(self) -> int | None:
        """This process's end of the pipe, opened on first use (None: no bell here). A
        receiver opens it before it first looks at the queue, so a ring between that look
        and its wait stays in the pipe for it."""
        if self._tried:
            return self._fd
        with self._lock:
            if not self._tried:
                self._fd = self._make()
                self._tried = True
        return self._fd

    def _make(self) -> int | None:
        if self.path is None or not hasattr(os, "mkfifo"):
            return None
        try:
            self.path.parent.mkdir(mode=0o700, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                os.mkfifo(self.path, 0o600)
            fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):  # something else took the name
            os.close(fd)
            return None
        return fd

    def close(self) -> None:
        """Close this process's end of the pipe (the pipe itself stays for the others)."""
        with self._lock:
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
            self._fd, self._tried = None, True

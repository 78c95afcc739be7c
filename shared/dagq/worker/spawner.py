"""One long-lived task supervisor per worker process: the spawn server.

Starting every task under a supervisor of its own (``dagq.worker.parentdeath``) costs a
second process start per task: the supervisor's own exec, about 0.35 ms of CPU on a
2-core machine, as much as the task's. Where the compiled supervisor is built, a worker
process instead starts it once, as ``dagq-supervisor --serve WORKER_PID``, and asks it
over a Unix socket to start each task: one ``vfork`` and one ``execve`` per task.

The server keeps the supervisor's guarantees for every task at once: it is a child
subreaper, so whatever a task leaves behind stays its descendant; it asks for a
parent-death signal and also reads the end of the socket as the worker's death (the
kernel closes the worker's end when the process dies, whichever thread started the
server); it then SIGKILLs every descendant until none is left. Each task's first process
has a session of its own and a SIGKILL parent-death signal, so a server killed on its
own takes those with it, and the worker fails their attempts (``ServerLost``).

Frames on the socket (little-endian): a request is ``magic, id, argc, envc, body`` as
five ``u32``, sent with the task's log descriptor (``SCM_RIGHTS``), then ``body`` bytes:
the directory ("" for none), the ``argc`` arguments and the ``envc`` ``NAME=VALUE``
strings, each ending with a NUL. A reply is ``id`` (``u32``), then ``kind``, ``pid``
and ``value`` (``i32``): STARTED with the task's pid, FAILED with the ``errno`` of a
failed fork, or EXITED with the task's wait status. One lock orders the requests; one
reader thread hands the replies to the threads waiting for them.
"""

from __future__ import annotations

import array
import contextlib
import itertools
import logging
import os
import signal
import socket
import struct
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dagq.worker import proctree

HEAD = struct.Struct("<5I")
REPLY = struct.Struct("<I3i")
MAGIC = 0x31535144
STARTED, EXITED, FAILED = 1, 2, 3
SERVER_FD = 3
"""The descriptor the server reads its socket on."""

_log = logging.getLogger(__name__)


class ServerLost(OSError):
    """Raised when the spawn server ended while a task was starting or running."""


@dataclass
class _Pending:
    started: threading.Event = field(default_factory=threading.Event)
    ended: threading.Event = field(default_factory=threading.Event)
    pid: int = 0
    status: int = 0
    error: OSError | None = None


class SpawnServer:
    """A running ``dagq-supervisor --serve`` and the socket to it."""

    def __init__(self, binary: str) -> None:
        """Start the server ``binary``; raises ``OSError`` if it cannot be started."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        passed = os.dup(theirs.fileno()) if theirs.fileno() == SERVER_FD else theirs.fileno()
        try:
            self.pid = os.posix_spawn(
                binary, [binary, "--serve", str(os.getpid())], dict(os.environ),
                setsid=True, setsigdef=_RESTORED,
                file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                              (os.POSIX_SPAWN_DUP2, passed, SERVER_FD)])
        except BaseException:
            mine.close()
            raise
        finally:
            if passed != theirs.fileno():
                os.close(passed)
            theirs.close()
        proctree.add_root(self.pid)
        self._sock = mine
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count(1)
        self._lost: str | None = None
        self._closing = False
        self.served = 0
        """Tasks it started."""
        self._reader = threading.Thread(target=self._read, name="dagq-spawner", daemon=True)
        self._reader.start()

    @property
    def alive(self) -> bool:
        """False once the server's end of the socket is gone."""
        return self._lost is None

    def start(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None,
              log_fd: int) -> tuple[int, int]:
        """Start ``argv`` with exactly ``env``, in ``cwd``, stdout and stderr to
        ``log_fd``: the request's id (for ``wait``) and the task's pid. Raises
        ``ServerLost``, or the ``OSError`` of a failed fork."""
        strings = [cwd or "", *argv, *(f"{k}={v}" for k, v in env.items())]
        body = b"".join(os.fsencode(s) + b"\0" for s in strings)
        pending = _Pending()
        with self._lock:
            if self._lost is not None:
                raise ServerLost(self._lost)
            rid = next(self._ids)
            self._pending[rid] = pending
        head = HEAD.pack(MAGIC, rid, len(argv), len(env), len(body))
        try:
            with self._send_lock:
                self._sock.sendmsg([head], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                             array.array("i", [log_fd]))])
                self._sock.sendall(body)
        except OSError as exc:
            self._lose(f"the task supervisor (pid {self.pid}) is gone: {exc}")
        pending.started.wait()
        if pending.error is not None:
            raise pending.error
        return rid, pending.pid

    def wait(self, rid: int) -> int:
        """The return code of the task of request ``rid`` once it ended (negative:
        killed by that signal). Raises ``ServerLost`` if the server ended first."""
        with self._lock:
            pending = self._pending.get(rid)
        if pending is None:
            raise KeyError(rid)
        pending.ended.wait()
        with self._lock:
            self._pending.pop(rid, None)
        if pending.error is not None:
            raise pending.error
        return os.waitstatus_to_exitcode(pending.status)

    def close(self) -> None:
        """End the server (it kills whatever still runs under it) and wait for it."""
        self._closing = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._reader.join(timeout=10)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        proctree.remove_root(self.pid)
        self._sock.close()

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = self._sock.recv(REPLY.size * 64)
            except OSError as exc:
                chunk, why = b"", str(exc)
            else:
                why = "its socket closed"
            if not chunk:
                self._lose(f"the task supervisor (pid {self.pid}) ended: {why}")
                return
            buf += chunk
            while len(buf) >= REPLY.size:
                rid, kind, pid, value = REPLY.unpack_from(buf)
                buf = buf[REPLY.size:]
                self._deliver(rid, kind, pid, value)

    def _deliver(self, rid: int, kind: int, pid: int, value: int) -> None:
        with self._lock:
            pending = self._pending.get(rid)
        if pending is None:
            return
        if kind == STARTED:
            self.served += 1
            pending.pid = pid
            pending.started.set()
        elif kind == EXITED:
            pending.status = value
            pending.ended.set()
        else:
            pending.error = OSError(value, f"cannot start the task: {os.strerror(value)}")
            with self._lock:
                self._pending.pop(rid, None)
            pending.started.set()
            pending.ended.set()

    def _lose(self, why: str) -> None:
        with self._lock:
            if self._lost is None:
                self._lost = why
                if not self._closing:
                    _log.error("%s; the tasks it ran are killed with it and fail; the next "
                               "task starts a new one", why)
            waiting = list(self._pending.values())
        for p in waiting:
            if not p.ended.is_set():
                p.error = ServerLost(why)
                p.started.set()
                p.ended.set()


_RESTORED = tuple(s for s in (getattr(signal, n, None) for n in ("SIGPIPE", "SIGXFSZ"))
                  if s is not None)

_servers: dict[str, SpawnServer] = {}
_servers_lock = threading.Lock()
_failed: set[str] = set()


def server(binary: str) -> SpawnServer | None:
    """This process's spawn server running ``binary``, started on first use (and again
    after it was lost); None where it cannot be started (warned once; tasks then run
    under a supervisor each)."""
    with _servers_lock:
        current = _servers.get(binary)
        if current is not None and current.alive:
            return current
        if binary in _failed:
            return None
        if current is not None:
            del _servers[binary]
            current.close()
            if not current.served:  # ended before its first task: it cannot serve here
                _failed.add(binary)
                _log.warning("the task supervisor %s ended as a server before its first "
                             "task: each task gets a supervisor of its own", binary)
                return None
        try:
            _servers[binary] = started = SpawnServer(binary)
        except OSError as exc:
            _failed.add(binary)
            _log.warning("cannot start the task supervisor %s as a server (%s): each "
                         "task gets a supervisor of its own", binary, exc)
            return None
        return started


def shutdown() -> None:
    """End this process's spawn servers (tests; a worker process just exits)."""
    with _servers_lock:
        while _servers:
            _servers.popitem()[1].close()


def _forget_after_fork() -> None:
    global _servers_lock
    _servers.clear()  # the parent's: not this process's to use or end
    _servers_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)

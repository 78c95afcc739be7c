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

Each worker thread that starts tasks gets a connection of its own to the server (a
socket pair whose other end it hands over on the worker's socket), asks for a task on it
and reads the task's replies from it itself: a task costs no thread switch more than a
``waitpid`` did. Frames (little-endian): a request is ``magic, id, argc, envc, body`` as
five ``u32`` with a descriptor attached (``SCM_RIGHTS``): CONNECT with the thread's
socket on the worker's socket; START with the task's log on a thread's connection,
followed by ``body`` bytes: the directory ("" for none), the ``argc`` arguments and the
``envc`` ``NAME=VALUE`` strings, each ending with a NUL. A reply is ``id`` (``u32``),
then ``kind``, ``pid`` and ``value`` (``i32``): STARTED with the task's pid, FAILED with
the ``errno`` of a failed fork, then EXITED with the task's wait status.
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
import sys
import threading
from collections.abc import Mapping, Sequence

from dagq.worker import proctree

HEAD = struct.Struct("<5I")
REPLY = struct.Struct("<I3i")
START, CONNECT = 0x31535144, 0x31435144
STARTED, EXITED, FAILED = 1, 2, 3
SERVER_FD = 3
"""The descriptor the server reads its socket on."""

_log = logging.getLogger(__name__)
_FS_ENCODING = sys.getfilesystemencoding()


class ServerLost(OSError):
    """Raised when the spawn server ended while a task was starting or running."""


class _Conn:
    """One thread's connection; closed when the thread ends (its ``threading.local``
    goes), which the server reads as the end of that connection."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.ids = itertools.count(1)

    def __del__(self) -> None:
        self.sock.close()


class SpawnServer:
    """A running ``dagq-supervisor --serve`` and the sockets to it."""

    def __init__(self, binary: str) -> None:
        """Start the server ``binary``; raises ``OSError`` if it cannot be started."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        passed = os.dup(theirs.fileno()) if theirs.fileno() == SERVER_FD else theirs.fileno()
        try:
            self.pid = os.posix_spawn(
                binary, [binary, "--serve", str(os.getpid())], dict(os.environ),
                setsid=True, setsigdef=RESTORED,
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
        self._main = mine
        self._lock = threading.Lock()
        self._local = threading.local()
        self._lost: str | None = None
        self._closing = False
        self.served = 0
        """Tasks it started."""

    @property
    def alive(self) -> bool:
        """False once the server was found gone."""
        return self._lost is None

    def start(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None,
              log_fd: int) -> int:
        """Start ``argv`` with exactly ``env``, in ``cwd``, stdout and stderr to
        ``log_fd``; the task's pid. ``wait`` for it in the same thread before this thread
        starts another. Raises ``ServerLost``, or the ``OSError`` of a failed fork."""
        if self._lost is not None:
            raise ServerLost(self._lost)
        conn = self._conn()
        strings = [cwd or "", *argv, *(f"{k}={v}" for k, v in env.items())]
        text = "\0".join([*strings, ""])
        if text.count("\0") != len(strings):  # as Popen and posix_spawn refuse it
            raise ValueError("embedded null byte in a task's command, environment or cwd")
        body = text.encode(_FS_ENCODING, "surrogateescape")  # as os.fsencode, at once
        head = HEAD.pack(START, next(conn.ids), len(argv), len(env), len(body))
        try:
            sent = conn.sock.sendmsg([head, body], _rights(log_fd))
            if sent < len(head) + len(body):  # only if a signal cut it short
                conn.sock.sendall((head + body)[sent:])
        except OSError as exc:
            raise self._lose(f"the task supervisor (pid {self.pid}) is gone: {exc}") from None
        kind, pid, value = self._reply(conn)
        if kind == FAILED:
            raise OSError(value, f"cannot start the task: {os.strerror(value)}")
        self.served += 1
        return pid

    def wait(self, pid: int) -> int:
        """The return code of the task ``pid`` this thread started, once it ended
        (negative: killed by that signal). Raises ``ServerLost`` if the server ended
        first."""
        kind, got, status = self._reply(self._conn())
        if kind != EXITED or got != pid:
            raise self._lose(f"the task supervisor (pid {self.pid}) answered out of turn: "
                             f"reply {kind} for pid {got} while waiting for pid {pid}")
        return os.waitstatus_to_exitcode(status)

    def close(self) -> None:
        """End the server (it kills whatever still runs under it) and wait for it."""
        self._closing = True
        with contextlib.suppress(OSError):
            self._main.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        proctree.remove_root(self.pid)
        self._main.close()

    def _conn(self) -> _Conn:
        conn: _Conn | None = getattr(self._local, "conn", None)
        if conn is None:
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                with self._lock:
                    self._main.sendmsg([HEAD.pack(CONNECT, 0, 0, 0, 0)],
                                       _rights(theirs.fileno()))
            except OSError as exc:
                mine.close()
                raise self._lose(f"the task supervisor (pid {self.pid}) is gone: {exc}") from None
            finally:
                theirs.close()
            conn = self._local.conn = _Conn(mine)
        return conn

    def _reply(self, conn: _Conn) -> tuple[int, int, int]:
        buf = b""
        while len(buf) < REPLY.size:
            try:
                chunk = conn.sock.recv(REPLY.size - len(buf))
            except OSError as exc:
                raise self._lose(f"the task supervisor (pid {self.pid}) ended: {exc}") from None
            if not chunk:
                raise self._lose(f"the task supervisor (pid {self.pid}) ended")
            buf += chunk
        _, kind, pid, value = REPLY.unpack(buf)
        return kind, pid, value

    def _lose(self, why: str) -> ServerLost:
        with self._lock:
            if self._lost is None:
                self._lost = why
                if not self._closing:
                    _log.error("%s; the tasks it ran are killed with it and fail; the next "
                               "task starts a new one", why)
        return ServerLost(why)


def _rights(fd: int) -> list[tuple[int, int, array.array[int]]]:
    """Ancillary data passing ``fd``."""
    return [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]


RESTORED = (signal.SIGPIPE, signal.SIGXFSZ)
"""Signals Python ignores that a started process gets back at their defaults (as
``Popen``'s ``restore_signals``)."""

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

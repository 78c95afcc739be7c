"""Run one task process in its own process group, with timeout, cancellation and kill
escalation to its whole process tree (``dagq.worker.proctree``).

On Linux a task runs under a supervisor (``dagq.worker.parentdeath``) that kills its
whole tree if this process dies: this process's spawn server (``dagq.worker.spawner``)
where the compiled supervisor is built, which starts the task's first process itself
(a session and group of its own, as before) and reports its return code; otherwise a
supervisor per task, the parent of the task's first process, which ends as that
process did (same return code)."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dagq.worker import proctree, spawner
from dagq.worker.parentdeath import available, command, serving, wrap

TAIL_BYTES = 4000


@dataclass(frozen=True)
class ProcessResult:
    """How a task process ended."""

    returncode: int
    """Exit code (negative: killed by that signal)."""
    tail: str
    """The last few KB of the combined stdout/stderr log."""
    timed_out: bool = False
    """True if it was stopped because its timeout passed."""
    stopped: bool = False
    """True if it was stopped on request (cancel or worker shutdown)."""


@dataclass
class _Watch:
    pid: int
    token: str
    stop: threading.Event
    deadline: float | None
    kill_timeout: float
    term_at: float | None = None
    timed_out: bool = False
    stopped: bool = False
    members: set[proctree.Member] = field(default_factory=set)
    scanned_at: float = 0.0

    def scan(self, now: float) -> set[proctree.Member]:
        """Every process of the task seen so far (rescanned when asked again later)."""
        self.members |= proctree.members(self.pid, self.token)
        self.scanned_at = now
        return self.members

    def kill(self) -> None:
        """SIGKILL the whole tree now."""
        self.term_at = float("inf")
        proctree.signal_all(self.pid, self.scan(time.monotonic()), signal.SIGKILL)

    def tree_alive(self) -> bool:
        return _group_alive(self.pid) or any(proctree.alive(m) for m in self.members
                                             if m[0] != self.pid)


class _Watchdog:
    """One thread for all task processes: SIGTERM on stop or timeout, SIGKILL after grace,
    to every process of the task's tree (``proctree``), and reaping of orphans.

    Slot threads block in ``wait()`` (so a finished process is noticed at once) while this
    thread enforces stops and deadlines every 50 ms.
    """

    def __init__(self) -> None:
        self._watches: dict[int, _Watch] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._reaped_at = 0.0

    def add(self, watch: _Watch) -> None:
        with self._lock:
            self._watches[watch.pid] = watch
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="dagq-watchdog",
                                                daemon=True)
                self._thread.start()

    def remove(self, pid: int) -> None:
        with self._lock:
            self._watches.pop(pid, None)

    def kill_all(self) -> int:
        """SIGKILL every watched task tree at once; how many."""
        with self._lock:
            watches = list(self._watches.values())
        for w in watches:
            w.stopped = w.stopped or not w.timed_out
            w.kill()
        return len(watches)

    def _run(self) -> None:
        while True:
            time.sleep(0.05)
            now = time.monotonic()
            with self._lock:
                watches = list(self._watches.values())
            for w in watches:
                if w.term_at is None:
                    if w.stop.is_set():
                        w.stopped = True
                    elif w.deadline is not None and now > w.deadline:
                        w.timed_out = True
                    if w.stopped or w.timed_out:
                        w.term_at = now
                        proctree.signal_all(w.pid, w.scan(now), signal.SIGTERM)
                elif now - w.term_at > w.kill_timeout:
                    w.kill()
                elif now - w.scanned_at > 0.5:
                    w.scan(now)  # note processes started while the tree shuts down
            if now - self._reaped_at > 1.0:
                self._reaped_at = now
                proctree.reap_orphans()


_WATCHDOG = _Watchdog()


def kill_all_now() -> int:
    """SIGKILL the process tree of every task running in this process; how many."""
    return _WATCHDOG.kill_all()


def run_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None,
    log_path: Path,
    stop: threading.Event,
    timeout_s: float | None,
    kill_timeout: float,
    on_start: Callable[[int], None] | None = None,
) -> ProcessResult:
    """Run ``argv``; SIGTERM its whole process tree on ``stop`` or timeout, SIGKILL after
    ``kill_timeout`` seconds; returns when the process (and, if stopped, its tree) ended."""
    token = proctree.new_token()
    full_env = {**env, proctree.TOKEN_ENV: token}
    # one descriptor for the task's output and, once it ended, for reading its tail
    log = os.open(log_path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        pid, wait, rooted = _start(argv, full_env, cwd, log)
    except BaseException:
        os.close(log)
        raise
    deadline = time.monotonic() + timeout_s if timeout_s is not None else None
    watch = _Watch(pid, token, stop, deadline, kill_timeout)
    _WATCHDOG.add(watch)
    try:
        if on_start is not None:
            on_start(pid)
        try:
            rc = wait()
        except spawner.ServerLost as exc:  # its first process died with it (SIGKILL)
            watch.kill()
            os.write(log, f"\ndagq: {exc}; the task was killed (see the worker's log)\n"
                     .encode())
            rc = -signal.SIGKILL
        if watch.stopped or watch.timed_out:
            # the shell leader dies at once on SIGTERM; the programs it started keep their
            # grace (the watchdog SIGKILLs the whole tree after ``kill_timeout``); the
            # supervisor, if any, waits for them before it exits
            while watch.tree_alive() and watch.term_at != float("inf"):
                time.sleep(0.05)
                proctree.reap_orphans()  # zombies of re-parented members count as alive
    finally:
        _WATCHDOG.remove(pid)
        if rooted:
            proctree.remove_root(pid)
        tail = _tail_of(log)
        os.close(log)
    # the tree may outlive its leader (background children): make sure it is gone
    if watch.stopped or watch.timed_out:
        proctree.signal_all(pid, watch.scan(time.monotonic()), signal.SIGKILL)
    return ProcessResult(rc, tail, timed_out=watch.timed_out,
                         stopped=watch.stopped)


def _start(argv: Sequence[str], env: Mapping[str, str], cwd: str | None, log: int
           ) -> tuple[int, Callable[[], int], bool]:
    """Start ``argv`` in a session of its own, stdin from /dev/null, stdout and stderr to
    ``log``: its pid, a function that waits for its return code (negative: killed by
    that signal), and whether it is this process's child (registered with ``proctree``).

    Under the spawn server where it runs (one ``vfork`` and ``execve`` per task); else
    under a supervisor of its own: ``posix_spawn`` where that is the compiled one (which
    closes what it inherits) and there is no directory to change to, about 0.3 ms less
    per task than ``Popen``, whose child runs Python's fork-and-exec code and reports
    back through a pipe; otherwise ``Popen``."""
    binary = _compiled()
    for _ in range(2):  # a server found lost is replaced once
        srv = spawner.server(binary) if binary is not None and serving() else None
        if srv is None:
            break
        with contextlib.suppress(spawner.ServerLost):
            pid = srv.start(argv, env, cwd, log)
            return pid, functools.partial(srv.wait, pid), False
    with proctree.roots_lock():
        wrapped = wrap(argv, env)
        if cwd is None and _POSIX_SPAWN and wrapped[0] == binary:
            pid = os.posix_spawn(wrapped[0], wrapped, env, setsid=True,
                                 setsigdef=spawner.RESTORED, file_actions=[
                                     (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                                     (os.POSIX_SPAWN_DUP2, log, 1),
                                     (os.POSIX_SPAWN_DUP2, log, 2)])
            proctree.add_root(pid)
            return pid, lambda: os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), True
        proc = subprocess.Popen(wrapped, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        proctree.add_root(proc.pid)
    return proc.pid, proc.wait, True


def _compiled() -> str | None:
    """The compiled supervisor's path where tasks run under it."""
    prefix = command() if available() else ()
    return prefix[0] if len(prefix) == 1 else None


_POSIX_SPAWN = hasattr(os, "posix_spawn") and hasattr(os, "waitstatus_to_exitcode")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _tail_of(fd: int, size: int = TAIL_BYTES) -> str:
    """The last ``size`` bytes of the open file ``fd`` as text ("" if unreadable)."""
    try:
        end = os.fstat(fd).st_size
        return os.pread(fd, size, max(0, end - size)).decode("utf-8", "replace")
    except OSError:
        return ""

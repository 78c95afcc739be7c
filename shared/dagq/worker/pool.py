"""``dagq worker QUEUE --processes N``: N worker processes on one queue, kept by one parent.

One worker process runs its slots as threads, and Python's interpreter lock lets one
thread run Python at a time: on small tasks a worker of two slots is bound by that lock,
not by the CPUs. ``--processes N`` forks N workers of ``--concurrency`` slots each (every
one a whole worker: its own id, heartbeat, claims, spawn server), and the parent only
watches them:

- SIGTERM or SIGINT to the parent is passed to every child, which releases its running
  tasks as a lone worker does; the parent exits when all have stopped.
- A child that ends on its own with status 0 (``--idle-timeout``, ``--max-tasks``) is not
  replaced. One that fails or is killed is started again after a pause that doubles from
  1 s up to 30 s (reset once a child has run a minute), and the parent says so on stderr.
  A failure within the first seconds of the pool (a bad store, a bad option) stops the
  whole pool with that child's status, as a lone worker would exit.
- Each child asks for SIGTERM when the parent dies (``PR_SET_PDEATHSIG``), so a parent
  killed with SIGKILL does not leave workers behind.
- Liveness (``dagq.worker.liveness``): each child keeps a file of its own (the pool's
  path plus ``.N``), and the parent touches the pool's file only while every child's file
  is fresh, so ``dagq worker QUEUE --check`` fails when any one child hangs.

Forking happens before the parent opens the store or starts a thread, so each child
begins as a clean, single-threaded copy of the command.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dagq.worker.liveness import STALE_AFTER_S, Liveness, check

LIVENESS_ENV = "DAGQ_LIVENESS_FILE"
PR_SET_PDEATHSIG = 1
EARLY_EXIT_S = 5.0
"""A child that fails this soon after the pool started stops the pool (a start-up error)."""
FIRST_PAUSE_S, LONGEST_PAUSE_S, HEALTHY_AFTER_S = 1.0, 30.0, 60.0


@dataclass
class Child:
    """One worker process of the pool."""

    index: int
    """Its place in the pool, 0 to N-1 (kept across restarts)."""
    pid: int = 0
    """Its process id; 0 while it waits to be started again."""
    started: float = 0.0
    """``time.monotonic()`` of its last start."""
    pause: float = FIRST_PAUSE_S
    """How long the next restart waits."""
    due: float = 0.0
    """When it is started again (when ``pid`` is 0)."""
    done: bool = False
    """It ended on its own with status 0 and is not replaced."""
    stale_told: bool = field(default=False, repr=False)


def child_liveness(path: Path, index: int) -> Path:
    """The liveness file of child ``index`` of a pool whose own file is ``path``."""
    return path.with_name(f"{path.name}.{index}")


def status_code(status: int) -> int:
    """A wait status as a shell would show it: the exit status, or 128 + the signal."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(sig).name}"
        return f"was killed by signal {sig}"
    return f"exited with status {os.WEXITSTATUS(status)}"


class ProcessPool:
    """Forks ``size`` children that each run ``run_child(index)`` and return its status."""

    def __init__(self, size: int, run_child: Callable[[int], int], liveness: Path, *,
                 echo: Callable[[str], None], early_exit_s: float = EARLY_EXIT_S,
                 liveness_every_s: float = 5.0, stale_after_s: float = STALE_AFTER_S,
                 tick_s: float = 0.2) -> None:
        if size < 1:
            raise ValueError(f"a pool needs at least one process, got {size}")
        self.children = [Child(i) for i in range(size)]
        self._run_child = run_child
        self._liveness = Liveness(liveness, f"pool:{os.getpid()}")
        self._echo = echo
        self._early = early_exit_s
        self._every = liveness_every_s
        self._stale = stale_after_s
        self._tick = tick_s
        self._stopping = False
        self._code = 0
        self._born = 0.0

    def run(self) -> int:
        """Start the children and keep them until a signal or their own ends; the status
        the pool exits with (0, or the first failure that stopped it)."""
        self._born = time.monotonic()
        for child in self.children:
            self._start(child)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        next_touch = 0.0
        while not all(c.done or (self._stopping and not c.pid) for c in self.children):
            self._reap()
            now = time.monotonic()
            if not self._stopping:
                for child in self.children:
                    if not child.pid and not child.done and now >= child.due:
                        self._start(child)
                if now >= next_touch:
                    next_touch = now + self._every
                    self._touch(now)
            time.sleep(self._tick)
        self._liveness.stop()
        return self._code

    def stop(self) -> None:
        """Stop every child (SIGTERM) and start none again."""
        self._stopping = True
        for child in self.children:
            if child.pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGTERM)

    def _on_signal(self, signum: int, _frame: object) -> None:
        if not self._stopping:
            self._say(f"worker pool: {signal.Signals(signum).name}, stopping "
                      f"{sum(1 for c in self.children if c.pid)} worker process(es)")
        self.stop()

    def _start(self, child: Child) -> None:
        path = child_liveness(self._liveness.path, child.index)
        parent = os.getpid()
        with contextlib.suppress(OSError):
            sys.stdout.flush()
            sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as exc:  # e.g. EAGAIN at the process limit: try again later
            self._later(child, f"could not be started ({exc})")
            return
        if pid == 0:  # the child never returns from here
            code = 1
            try:
                _die_with(parent)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the pool's handlers
                signal.signal(signal.SIGINT, signal.default_int_handler)
                os.environ[LIVENESS_ENV] = str(path)
                code = self._run_child(child.index)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException as exc:  # whatever it is, the child must not return
                print(f"error: worker process {child.index} failed: {exc!r}", file=sys.stderr)
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        child.pid, child.started = pid, time.monotonic()

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = next((c for c in self.children if c.pid == pid), None)
            if child is not None:
                self._ended(child, status)

    def _ended(self, child: Child, status: int) -> None:
        now = time.monotonic()
        child.pid = 0
        code = status_code(status)
        if self._stopping:
            if code and not self._code:
                self._code = code
            return
        if code == 0:
            child.done = True
            return
        if now - self._born < self._early:
            self._say(f"worker pool: worker process {child.index} {_describe(status)} at "
                      "start; stopping the pool")
            self._code = code
            self.stop()
            return
        if now - child.started >= HEALTHY_AFTER_S:
            child.pause = FIRST_PAUSE_S
        self._later(child, _describe(status), " (its released tasks go to the others; see the "
                                              "lines above for why it ended)")

    def _later(self, child: Child, what: str, more: str = "") -> None:
        """Start ``child`` again after its pause, which then doubles."""
        child.due = time.monotonic() + child.pause
        self._say(f"worker pool: worker process {child.index} {what}; starting another in "
                  f"{child.pause:g}s{more}")
        child.pause = min(child.pause * 2, LONGEST_PAUSE_S)

    def _say(self, line: str) -> None:
        """A line on the pool's stderr; a stderr gone (a closed pipe) must not stop it."""
        with contextlib.suppress(OSError):
            self._echo(line)

    def _touch(self, now: float) -> None:
        """Touch the pool's liveness file if every child's own file is fresh (or the
        child started too recently to have written one)."""
        wall = time.time()
        fresh = True
        for child in self.children:
            if child.done or not child.pid or now - child.started < self._stale:
                continue
            ok, why = check(child_liveness(self._liveness.path, child.index), wall, self._stale)
            if not ok:
                fresh = False
                if not child.stale_told:
                    self._say(f"worker pool: worker process {child.index} (pid {child.pid}) "
                              f"looks stuck: {why}; the pool's liveness file is no longer "
                              "touched, so `--check` fails")
                child.stale_told = True
            else:
                child.stale_told = False
        if fresh:
            self._liveness.touch()


def _die_with(parent: int) -> None:
    """Ask for SIGTERM when ``parent`` dies (Linux), and exit now if it already has."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)

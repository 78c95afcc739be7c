"""Run one task process in its own process group, with timeout, cancellation and kill escalation."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dagq.worker.parentdeath import wrap

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
    stop: threading.Event
    deadline: float | None
    kill_timeout: float
    term_at: float | None = None
    timed_out: bool = False
    stopped: bool = False


class _Watchdog:
    """One thread for all task processes: SIGTERM on stop or timeout, SIGKILL after grace.

    Slot threads block in ``wait()`` (so a finished process is noticed at once) while this
    thread enforces stops and deadlines every 50 ms.
    """

    def __init__(self) -> None:
        self._watches: dict[int, _Watch] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

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
                        _signal_group(w.pid, signal.SIGTERM)
                elif now - w.term_at > w.kill_timeout:
                    w.term_at = float("inf")
                    _signal_group(w.pid, signal.SIGKILL)


_WATCHDOG = _Watchdog()


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
    """Run ``argv``; SIGTERM its process group on ``stop`` or timeout, SIGKILL after
    ``kill_timeout`` seconds; returns when the process has exited."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            wrap(argv), env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
    deadline = time.monotonic() + timeout_s if timeout_s is not None else None
    watch = _Watch(proc.pid, stop, deadline, kill_timeout)
    _WATCHDOG.add(watch)
    try:
        if on_start is not None:
            on_start(proc.pid)
        rc = proc.wait()
        if watch.stopped or watch.timed_out:
            # the shell leader dies at once on SIGTERM; the program it started keeps its
            # grace (the watchdog still SIGKILLs the group after ``kill_timeout``)
            while _group_alive(proc.pid) and watch.term_at != float("inf"):
                time.sleep(0.05)
    finally:
        _WATCHDOG.remove(proc.pid)
    # the group may outlive its leader (background children): make sure it is gone
    if watch.stopped or watch.timed_out:
        _signal_group(proc.pid, signal.SIGKILL)
    return ProcessResult(rc, read_tail(log_path), timed_out=watch.timed_out,
                         stopped=watch.stopped)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_tail(path: Path, size: int = TAIL_BYTES) -> str:
    """The last ``size`` bytes of ``path`` as text ("" if missing)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            end = f.tell()
            f.seek(max(0, end - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""

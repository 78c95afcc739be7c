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
            list(argv), env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
    if on_start is not None:
        on_start(proc.pid)
    started = time.monotonic()
    term_at: float | None = None
    timed_out = stopped = False
    poll = 0.002
    while True:
        try:
            rc = proc.wait(timeout=poll)
            break
        except subprocess.TimeoutExpired:
            poll = min(poll * 2, 0.1)
        now = time.monotonic()
        if term_at is None:
            if stop.is_set():
                stopped = True
            elif timeout_s is not None and now - started > timeout_s:
                timed_out = True
            if stopped or timed_out:
                _signal_group(proc.pid, signal.SIGTERM)
                term_at = now
        elif now - term_at > kill_timeout:
            _signal_group(proc.pid, signal.SIGKILL)
            term_at = float("inf")
    # the group may outlive its leader (background children): make sure it is gone
    if stopped or timed_out:
        _signal_group(proc.pid, signal.SIGKILL)
    return ProcessResult(rc, read_tail(log_path), timed_out=timed_out, stopped=stopped)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


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

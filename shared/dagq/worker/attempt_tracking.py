"""One attempt as operators see it: its stored log, its history record, its log lines.

``AttemptTracker.start()`` logs a start line and starts capturing the attempt's output;
an attempt still running after ``DAGQ_LOG_FLUSH_INTERVAL`` gets a ``running`` record (so
short tasks cost one record write, not two); ``end()`` finishes the capture, writes the
final record (result, exit code or signal, duration, error line and tail, log size) and
logs an end line. Records are written in the background (``HistoryWriter``); store
errors are logged and never fail the task: history is best effort, the result travels
in the completion message as always. With
``DAGQ_LOG_CAPTURE=false`` neither the output nor the record is stored.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from dagq.config import Settings
from dagq.ports import Backend
from dagq.protocol import attempts
from dagq.protocol.messages import TaskMessage
from dagq.worker.eventlog import EVENTS as events
from dagq.worker.history import HistoryWriter
from dagq.worker.logcapture import LogCapture, LogStats
from dagq.worker.pacer import PACER, Pacer
from dagq.worker.processors import Outcome


def result_of(outcome: Outcome, *, released: bool, cancelled: bool) -> str:
    """The record's ``result`` for how an attempt ended."""
    if released:
        return "released"
    if cancelled:
        return "cancelled"
    if outcome.success:
        return "succeeded"
    if outcome.timed_out:
        return "timed_out"
    return "stopped" if outcome.stopped else "failed"


_TRAILERS = {
    "released": "\n[dagq: released by worker {worker} (shutting down or preempted); "
                "the same attempt runs again]\n",
    "cancelled": "\n[dagq: stopped by worker {worker}: the workflow was cancelled]\n",
    "timed_out": "\n[dagq: stopped by worker {worker}: the task's timeout passed]\n",
    "stopped": "\n[dagq: stopped by worker {worker}]\n",
}
"""Lines the worker adds to the log of an attempt it stopped, so the log says why."""


class AttemptTracker:
    """Tracks one run of one attempt on this worker."""

    def __init__(self, backend: Backend, settings: Settings, worker_id: str,
                 task: TaskMessage, log_path: Path, history: HistoryWriter,
                 pacer: Pacer = PACER) -> None:
        self.backend, self.worker_id, self.task = backend, worker_id, task
        self.history = history
        self.started_at = time.time()
        self.run_id = int(self.started_at * 1000)
        self._t0 = time.monotonic()
        self._ended = False
        self._lock = threading.Lock()
        self.log_path = log_path
        self.capture = LogCapture(
            backend.outputs, log_path, task.workflow_id, task.task, task.attempt, self.run_id,
            max_bytes=settings.log_max_bytes, flush_interval=settings.log_flush_interval,
        ) if settings.log_capture else None
        self._pacer = pacer
        self._flush_interval = settings.log_flush_interval
        self._timer = -1  # the pacer's handle of the "still running" record
        self.record: dict[str, Any] = {
            "task": task.task, "attempt": task.attempt, "run_id": self.run_id,
            "worker": worker_id, "started_at": self.started_at, "ended_at": None,
            "duration_s": None, "result": "running", "exit_code": None, "signal": None,
            "error": None, "error_tail": None, "released": False, "log": None,
        }

    def start(self) -> None:
        """Announce the start; begin streaming the log."""
        if self.capture is not None:
            self.capture.start(self._pacer)
            self._timer = self._pacer.call_later(self._flush_interval, self._still_running)
        events.info("task start %s attempt %d", self._label(), self.task.attempt,
                    extra={"dagq": self._fields(event="task_start")})

    def end(self, outcome: Outcome, *, released: bool = False,
            cancelled: bool = False) -> LogStats | None:
        """Finish the log, write the final record and announce the end (once; later
        calls do nothing and return None)."""
        with self._lock:  # after this, the running record can no longer be written
            if self._ended:
                return None
            self._ended = True
        self._pacer.cancel(self._timer)
        result = result_of(outcome, released=released, cancelled=cancelled)
        trailer = _TRAILERS.get(result)
        if self.capture is None:
            self.log_path.unlink(missing_ok=True)
            stats = LogStats(0, 0, False, 0)
        else:
            stats = self.capture.finish(trailer.format(worker=self.worker_id) if trailer
                                        else None)
        duration = time.monotonic() - self._t0
        code = outcome.exit_code
        self.record.update({
            "ended_at": self.started_at + duration, "duration_s": round(duration, 3),
            "result": result, "released": released,
            "exit_code": code if code is not None and code >= 0 else None,
            "signal": -code if code is not None and code < 0 else None,
            "log": {"printed": stats.printed, "stored": stats.stored,
                    "truncated": stats.truncated},
            **({} if outcome.success else attempts.error_fields(outcome.error)),
        })
        if self.capture is not None:
            self._write()
        level = logging.INFO if outcome.success or released else logging.WARNING
        error = self.record.get("error")
        events.log(level, "task end %s attempt %d %s in %.2fs%s", self._label(),
                   self.task.attempt, result, duration, f": {error}" if error else "",
                   extra={"dagq": self._fields(event="task_end", result=result,
                                               duration_s=round(duration, 3),
                                               exit_code=code, error=error)})
        return stats

    def elapsed(self) -> float:
        """Seconds since the attempt started (sent in its completion for metrics)."""
        return round(time.monotonic() - self._t0, 3)

    def _label(self) -> str:
        return f"{self.task.workflow_id}/{self.task.task}"

    def _fields(self, **more: Any) -> dict[str, Any]:
        return {"workflow_id": self.task.workflow_id, "task": self.task.task,
                "attempt": self.task.attempt, "run_id": self.run_id, "worker": self.worker_id,
                **more}

    def _still_running(self) -> None:
        with self._lock:
            if not self._ended:
                self._write()

    def _write(self) -> None:
        self.history.submit(self.task.workflow_id, self.record)

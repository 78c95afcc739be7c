"""Whether a delivered attempt may start: the worker's check before running a task.

One state read per workflow, trusted for ``ADMISSION_TTL_S`` (the cancel protocol in
``dagq.runtime.control`` relies on that bound). A cached state that does not know the attempt
yet (it was read before the dispatch was written) is read again, so a fresh dispatch is
never refused because of the cache.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from dagq.core.engine.peek import Facts, peek
from dagq.errors import NotFound
from dagq.ports import StateStore
from dagq.protocol.cancels import ADMISSION_TTL_S
from dagq.protocol.messages import TaskMessage

MAX_CACHED = 256

REASONS = {
    "cancelled": "the workflow was cancelled",
    "ended": "the attempt is no longer current (it was superseded, finished or reset)",
    "unknown": "the workflow's state does not know this attempt",
    "gone": "the workflow no longer exists",
}
"""Why a delivered attempt is dropped, by verdict."""


class Admission:
    """Judges delivered attempts against their workflow's state (cached briefly)."""

    def __init__(self, states: StateStore, ttl_s: float = ADMISSION_TTL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.states = states
        self.ttl_s = ttl_s
        self.clock = clock
        self.reads = 0
        self._cache: dict[str, tuple[float, Facts | None]] = {}
        self._lock = threading.Lock()

    def judge(self, task: TaskMessage, *, fresh: bool = False) -> str:
        """``"run"`` or a key of ``REASONS``; store errors propagate (do not start)."""
        read_now = fresh
        state = self._state(task.workflow_id, fresh)
        while True:
            if state is None:
                return "gone"
            verdict = state.judge(task.task, task.attempt, task.key)
            if verdict != "unknown" or read_now:
                return verdict
            read_now = True
            state = self._state(task.workflow_id, True)

    def _state(self, workflow_id: str, fresh: bool) -> Facts | None:
        now = self.clock()
        with self._lock:
            hit = self._cache.get(workflow_id)
        if hit is not None and not fresh and now - hit[0] < self.ttl_s:
            return hit[1]
        read_at = self.clock()  # trust starts when the read starts
        try:
            data, _ = self.states.read(workflow_id)
            # the few columns it needs, not a full state; only new deltas after a first read
            state: Facts | None = peek(data, hit[1] if hit is not None else None)
        except NotFound:
            state = None
        self.reads += 1
        with self._lock:
            if len(self._cache) >= MAX_CACHED:
                self._cache = {k: v for k, v in self._cache.items()
                               if now - v[0] < self.ttl_s}
            self._cache[workflow_id] = (read_at, state)
        return state

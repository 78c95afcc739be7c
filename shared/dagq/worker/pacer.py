"""One thread that runs a worker's small delayed jobs, so that an attempt starts none.

A short task used to start two threads of its own (the "still running" record timer and
the log capture loop) even when it ended long before either had anything to do; each
start and join costs a few hundred microseconds on the task's critical path. Attempts now
ask the worker's ``Pacer`` to call them back later instead: an attempt that ends first
cancels the call and no thread was ever started for it. Callbacks run on the pacer's
thread one after another, so they must be quick (write a record to a background writer,
start a thread of their own for long work).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("dagq.worker")


class Pacer:
    """Runs callbacks when they are due, on one daemon thread started on first use."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._due: list[tuple[float, int]] = []  # a heap; cancelled handles stay until due
        self._live: dict[int, Callable[[], object]] = {}
        self._ids = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def call_later(self, delay_s: float, callback: Callable[[], object]) -> int:
        """Call ``callback()`` in ``delay_s`` seconds; the handle to ``cancel`` it with."""
        handle = next(self._ids)
        with self._cond:
            if len(self._due) > 64 and len(self._due) > 4 * len(self._live):
                self._due = [e for e in self._due if e[1] in self._live]  # drop the dead
                heapq.heapify(self._due)
            heapq.heappush(self._due, (self._clock() + delay_s, handle))
            self._live[handle] = callback
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dagq-pacer",
                                                daemon=True)
                self._thread.start()
            elif self._due[0][1] == handle:  # earlier than what the thread waits for
                self._cond.notify()
        return handle

    def cancel(self, handle: int) -> None:
        """Do not call the callback of ``handle`` (no effect once it was called)."""
        with self._cond:
            self._live.pop(handle, None)

    def pending(self) -> int:
        """Callbacks waiting to be called."""
        with self._cond:
            return len(self._live)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due or self._due[0][0] > self._clock():
                    while self._due and self._due[0][1] not in self._live:
                        heapq.heappop(self._due)  # cancelled: no reason to wake for it
                    if self._due and self._due[0][0] <= self._clock():
                        break
                    self._cond.wait(None if not self._due else self._due[0][0] - self._clock())
                _, handle = heapq.heappop(self._due)
                callback = self._live.pop(handle, None)
            if callback is None:  # cancelled
                continue
            try:
                callback()
            except Exception:  # one attempt's callback must not stop the others'
                log.exception("a delayed job of the worker failed")


PACER = Pacer()
"""The pacer shared by the attempts of this process."""

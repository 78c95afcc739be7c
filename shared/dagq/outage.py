"""Riding out store and queue outages: bounded exponential back-off, few log lines.

Long-running loops (the coordinator, worker slots, their monitors) wrap each round in an
``Outage``: a transient failure makes the loop wait ``delay()`` and try again instead of
exiting; the first failure logs a warning, repeats log one reminder line a minute, and
the first success after it logs that the service is back. Nothing here decides what is
transient: callers pass the exceptions they know to be (``StoreUnavailable`` and
friends).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from dagq.errors import StoreUnavailable

T = TypeVar("T")

TRANSIENT: tuple[type[BaseException], ...] = (StoreUnavailable, ConnectionError, TimeoutError)
"""Errors that mean "the service is not reachable right now"."""


class Outage:
    """The outage state of one loop: whether it is in an outage and how long to wait."""

    def __init__(self, what: str, log: logging.Logger, *, first: float = 0.5,
                 ceiling: float = 30.0, remind_every: float = 60.0) -> None:
        self.what = what
        self.log = log
        self.first = first
        self.ceiling = ceiling
        self.remind_every = remind_every
        self.failures = 0
        self.since = 0.0
        self.reminded = 0.0

    @property
    def down(self) -> bool:
        """True while the last round failed."""
        return self.failures > 0

    def failed(self, exc: BaseException) -> float:
        """Record a failed round; returns the seconds to wait before the next one."""
        now = time.monotonic()
        if self.failures == 0:
            self.since = self.reminded = now
            self.log.warning("%s: the store is unavailable (%s); retrying with back-off "
                             "until it returns", self.what, exc)
        elif now - self.reminded >= self.remind_every:
            self.reminded = now
            self.log.warning("%s: the store is still unavailable after %.0fs (%d failed "
                             "round(s)): %s", self.what, now - self.since, self.failures, exc)
        self.failures += 1
        return self.delay()

    def ok(self) -> None:
        """Record a successful round (logs the recovery once)."""
        if self.failures:
            self.log.warning("%s: the store is available again after %.1fs (%d failed "
                             "round(s))", self.what, time.monotonic() - self.since,
                             self.failures)
        self.failures = 0

    def delay(self) -> float:
        """The wait before the next round: doubling from ``first`` up to ``ceiling``."""
        if self.failures == 0:
            return 0.0
        return float(min(self.ceiling, self.first * 2 ** min(self.failures - 1, 16)))


def retrying(call: Callable[[], T], outage: Outage, sleep: Callable[[float], object],
             give_up_after: float) -> T:
    """``call()``, retried on transient errors with ``outage``'s back-off for at most
    ``give_up_after`` seconds (then the last error propagates)."""
    deadline = time.monotonic() + give_up_after
    while True:
        try:
            result = call()
        except TRANSIENT as exc:
            wait = outage.failed(exc)
            if time.monotonic() + wait > deadline:
                raise
            sleep(wait)
            continue
        outage.ok()
        return result

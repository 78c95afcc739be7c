"""Waiting for a workflow to end: one poll loop shared by the clients and the HTTP API.

The loop reads a summary, returns it once its status is terminal, and otherwise sleeps
until the next poll or the deadline, whichever comes first. The clock and the sleep are
passed in, so the loop itself does no I/O beyond what ``read`` does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from dagq.core.model import TERMINAL_WORKFLOW_STATUSES

Summary = dict[str, Any]


def is_terminal(summary: Summary) -> bool:
    """True when the summary's workflow status is completed, failed or cancelled."""
    return summary.get("status") in TERMINAL_WORKFLOW_STATUSES


def poll_until_terminal(read: Callable[[], Summary], timeout_s: float | None, *,
                        interval_s: float = 1.0,
                        clock: Callable[[], float] = time.monotonic,
                        sleep: Callable[[float], None] = time.sleep) -> Summary:
    """Call ``read`` every ``interval_s`` until its summary is terminal or ``timeout_s``
    has passed (``None``: no limit); the last summary read."""
    deadline = None if timeout_s is None else clock() + max(0.0, timeout_s)
    while True:
        summary = read()
        if is_terminal(summary):
            return summary
        if deadline is None:
            sleep(interval_s)
            continue
        left = deadline - clock()
        if left <= 0:
            return summary
        sleep(min(interval_s, left))

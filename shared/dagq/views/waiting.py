"""Waiting for a workflow to end: one poll loop shared by the clients and the HTTP API.

The loop reads a summary, returns it once its status is terminal, and otherwise sleeps
until the next poll or the deadline, whichever comes first. The clock and the sleep are
passed in, so the loop itself does no I/O beyond what ``read`` does.
"""

from __future__ import annotations

import re
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


_NO_WORKER = re.compile(r"queue (?P<queue>'[^']*'|\"[^\"]*\") has no live worker")
_NOT_STARTED = "has not been started by a coordinator"


def hints_of(rows: list[dict[str, object]]) -> dict[str, str]:
    """Why a wait cannot end, from ``explain`` rows: one sentence per blocker (a queue
    no live worker serves, a workflow no coordinator has started), keyed so each is told
    once. The CLI's wait hints and the web page's banner both say these."""
    queued: dict[str, list[str]] = {}
    out: dict[str, str] = {}
    for row in rows:
        reasons = row.get("reasons")
        for reason in reasons if isinstance(reasons, list) else []:
            text = str(reason)
            if (m := _NO_WORKER.search(text)) and row.get("phase") == "queued":
                queued.setdefault(m.group("queue").strip("'\""), []).append(str(row["task"]))
            elif _NOT_STARTED in text:
                out["coordinator"] = ("no coordinator has started this workflow: is one "
                                      "running? (start one: dagq coordinator)")
    for queue, tasks in sorted(queued.items()):
        shown = ", ".join(tasks[:5]) + (f" and {len(tasks) - 5} more" if len(tasks) > 5 else "")
        out[f"queue:{queue}"] = (f"no worker serves queue {queue!r}: {len(tasks)} task(s) "
                                 f"queued there ({shown}); start one: dagq worker {queue}")
    return out

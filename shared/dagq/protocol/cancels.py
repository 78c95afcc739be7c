"""Cancel hints: what a cancel leaves for workers to poll, and how long workers trust what
they read.

The state stays the authority; the hint (one record per cancelled workflow in the
``cancels`` partition) lets a busy worker learn of cancels with one listing per interval
instead of one state read per running attempt.
"""

from __future__ import annotations

from dagq.errors import DagqError
from dagq.ports import Records

CANCELS = "cancels"
"""Records partition: one record per cancelled workflow (``{"at": time}``), a hint that
workers poll; the state stays the authority."""
CANCEL_HINT_KEEP_S = 3600.0
"""Cancel hints older than this are pruned."""
ADMISSION_TTL_S = 1.0
"""How long a worker may trust a state read when deciding to start an attempt."""


def prune_cancel_hints(records: Records, now: float, keep_s: float = CANCEL_HINT_KEEP_S) -> int:
    """Remove cancel hints older than ``keep_s`` (workers have long acted on them)."""
    gone = 0
    try:
        for key, rec in records.list(CANCELS):
            if now - float(rec.get("at", 0) or 0) > keep_s:
                records.delete(CANCELS, key)
                gone += 1
    except DagqError:
        pass  # the next worker to start prunes them
    return gone

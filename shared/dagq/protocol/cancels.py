"""Cancel hints: what a cancel leaves for workers to poll, and how long workers trust what
they read.

The state stays the authority; the hint (one record per cancelled workflow in the
``cancels`` partition) lets a busy worker learn of cancels with one listing per interval
instead of one state read per running attempt.

The hint and the index's ``cancel_requested`` flag are a function of the state: both
say ``state.cancel_requested``. Concurrent cancels and retries keep it so without
conditional writes (records cannot be deleted conditionally): after its state write,
each request writes both from what it wrote, then reads the state again (its ETag; the
state only when that changed) and writes again until a read made after its last write
agrees (``Control.publish``). The last write of the hint is thus followed by a read that
agreed, and any state write after that read is followed by its own writer's hint write,
so, once the requests return, the hint matches the last state write whatever order they
landed in. A request that stopped between its state write and its last hint write leaves
a hint without a flag (cancel writes its hint first, retry clears the flag first; a
publish writes the hint before setting the flag and clears the flag before deleting the
hint); pruning can leave a flag without a hint. The coordinator's sweep publishes both
again for each such workflow (the state is the truth).
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

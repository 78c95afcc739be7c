"""The coordinator's periodic repair sweep: what crashes and lost messages leave behind.

Every ``DAGQ_SWEEP_INTERVAL`` the sweep finishes cancels, starts pending workflows whose
submitter stopped before starting them, and looks at every running workflow: re-sends
outbox entries nobody cleared, fails tasks past their timeout and decides tasks a retry
reset. A running workflow this coordinator has cached costs one small ETag request when
nothing is to be done (its state is re-read only when another writer changed it).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from dagq.core import engine
from dagq.runtime import poison
from dagq.runtime.cancels import finish_cancels

if TYPE_CHECKING:
    from dagq.runtime.coordinator import Coordinator

log = logging.getLogger("dagq.coordinator")


def sweep(coord: Coordinator, now: float) -> None:
    """One sweep of every pending, running and cancelling workflow of the store."""
    index = coord.backend.index
    finish_cancels(coord, now)
    for row in index.query(status="pending"):
        not_before = float(row.extra.get("not_before", 0) or 0)
        if now - max(row.updated_at, not_before) < coord.settings.stale_pending:
            continue  # not stale yet (or a delayed child whose start is still due)
        if not poison.stored(coord, row.id):
            log.warning("workflow %s was never stored (its submitter crashed): failing it",
                        row.id)
            index.update_progress(row.id, status="failed", counts=row.counts,
                                  updated_at=now)
            continue
        log.info("starting stale pending workflow %s", row.id)
        poison.guarded(coord, row.id, lambda s: [engine.start(s, coord.clock())])
    grace = coord.settings.outbox_grace
    for row in index.query(status="running"):
        if not coord.caches(row.id) and now - row.updated_at < grace:
            continue  # another coordinator is actively writing it
        repair(coord, row.id)


def repair(coord: Coordinator, workflow_id: str) -> None:
    """Re-send stale outbox entries, expire overdue tasks and decide tasks a retry reset
    whose control message was lost (no write if none of these); a state that cannot be
    updated fails its workflow instead of stopping the sweep."""
    poison.guarded(coord, workflow_id, lambda s: [
        engine.expire(s, coord.clock(), coord.settings.timeout_grace),
        engine.resume(s, coord.clock(), resolve=coord.resolve)])  # lost retry

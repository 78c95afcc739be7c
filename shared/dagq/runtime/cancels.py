"""The coordinator's part of cancellation: finishing cancels in its sweep and cancelling
child workflows (the cancel itself is written by ``dagq.control``)."""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from dagq.core import engine
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES
from dagq.errors import WorkflowFinished, WorkflowNotFound
from dagq.ports import ChildWorkflows
from dagq.protocol.cancels import ADMISSION_TTL_S
from dagq.worker.heartbeat import executing_keys

if TYPE_CHECKING:
    from dagq.runtime.coordinator import Coordinator

log = logging.getLogger("dagq.coordinator")


def finish_cancels(coord: Coordinator, now: float) -> None:
    """For every workflow whose cancel is in progress: apply a cancel flag its state lacks
    (an older client set only the flag), cancel the attempts no live worker runs (their
    worker died, or no worker serves their queue) and cancel its active children."""
    executing: set[str] | None = None
    for row in coord.backend.index.query(cancel_requested=True):
        if row.status in TERMINAL_WORKFLOW_STATUSES:
            continue
        fresh = coord.commit(row.id, lambda s: [engine.cancel(s, coord.clock())])
        written = any(e.changed() for e in fresh or [])
        # settling needs the cancel written at least ADMISSION_TTL_S ago (dagq.control)
        if not written and now - row.updated_at >= 2 * ADMISSION_TTL_S:
            if executing is None:
                executing = executing_keys(coord.backend.records, now)
            coord.control.settle(row.id, executing)
        cascade_cancel(coord.children, row.id)


def cascade_cancel(children: ChildWorkflows, workflow_id: str) -> None:
    """Cancel every active descendant not yet asked to cancel."""
    for row in children.descendants(workflow_id):
        if row.status not in TERMINAL_WORKFLOW_STATUSES and not row.cancel_requested:
            log.info("cancelling child workflow %s of %s", row.id, workflow_id)
            with contextlib.suppress(WorkflowFinished, WorkflowNotFound):
                children.cancel(row.id, settle=False)

"""The coordinator's part of cancellation: finishing cancels in its sweep and cancelling
child workflows (the cancel itself is written by ``dagq.runtime.control``)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from dagq.core import engine
from dagq.core.engine import WorkflowState
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES
from dagq.errors import DagqError, WorkflowFinished, WorkflowNotFound
from dagq.ports import Backend, ChildWorkflows
from dagq.protocol.cancels import ADMISSION_TTL_S, CANCELS
from dagq.runtime.committing import Committing
from dagq.runtime.control import Control

log = logging.getLogger("dagq.coordinator")

WITHDRAWN_S = 10.0
"""A flag whose state a retry wrote less than this ago is not applied as a cancel."""


def finish_cancels(backend: Backend, now: float, *, commits: Committing, control: Control,
                   children: ChildWorkflows, clock: Callable[[], float]) -> None:
    """For every workflow whose cancel is in progress: apply a cancel flag its state lacks
    (an older client set only the flag), cancel the attempts no live worker runs (their
    worker died, or no worker serves their queue) and cancel its active children. Where
    the cancel hint and the flag disagree with each other or with the state (a cancel or
    retry stopped between its writes), publish both again from the state."""
    hinted = _hinted(backend)
    flagged: set[str] = set()
    for row in backend.index.query(cancel_requested=True):
        flagged.add(row.id)
        if row.status in TERMINAL_WORKFLOW_STATUSES:
            continue
        hint = hinted is not None and row.id in hinted
        skipped: list[bool] = []

        def apply(state: WorkflowState, hint: bool = hint, skipped: list[bool] = skipped
                  ) -> list[engine.Effects]:
            if not state.cancel_requested and _put_right(state, hint, clock()):
                skipped.append(True)
                return []
            return [engine.cancel(state, clock())]

        fresh = commits.commit(row.id, apply)
        written = any(e.changed() for e in fresh or [])
        if written or skipped or (hinted is not None and not hint):
            control.publish(row.id)
        if skipped:
            continue  # no cancel: nothing to settle, no children to cancel
        # settling needs the cancel written at least ADMISSION_TTL_S ago (dagq.runtime.control)
        if not written and now - row.updated_at >= 2 * ADMISSION_TTL_S:
            control.settle(row.id)  # reads the heartbeats and this workflow's claims
        cascade_cancel(children, row.id)
    for workflow_id in sorted((hinted or set()) - flagged):
        control.publish(workflow_id)  # a hint without its flag


def _hinted(backend: Backend) -> set[str] | None:
    try:
        return {key for key, _ in backend.records.list(CANCELS)}
    except DagqError as exc:
        log.warning("could not read the cancel hints: %s", exc)
        return None


def _put_right(state: WorkflowState, hint: bool, now: float) -> bool:
    """Whether a flag without the cancel in the state is being put right by a current
    client (``Control.publish``) rather than set by an older one, which wrote no hint
    and did not write the state: there is a hint, or a retry wrote the state just now."""
    return hint or (bool(state.retry_ids) and now - state.updated_at < WITHDRAWN_S)


def cascade_cancel(children: ChildWorkflows, workflow_id: str) -> None:
    """Cancel every active descendant not yet asked to cancel."""
    for row in children.descendants(workflow_id):
        if row.status not in TERMINAL_WORKFLOW_STATUSES and not row.cancel_requested:
            log.info("cancelling child workflow %s of %s", row.id, workflow_id)
            with contextlib.suppress(WorkflowFinished, WorkflowNotFound):
                children.cancel(row.id, settle=False)

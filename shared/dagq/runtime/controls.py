"""How the coordinator applies control messages (start, cancel, retry) and which outbox
entries an already-applied control hands over for sending."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from dagq.core import engine
from dagq.core.engine import WorkflowState
from dagq.protocol.messages import CompletionQueueMessage, ControlMessage


def apply_control(state: WorkflowState, item: ControlMessage, now: float) -> engine.Effects:
    """Apply one control message (start, cancel, retry, suspend, resume) to ``state``."""
    if item.action == "start":
        return engine.start(state, now)
    if item.action == "cancel":
        return engine.cancel(state, now)
    if item.action == "suspend":
        return engine.suspend(state, now)
    if item.action == "resume":
        return engine.unsuspend(state, now)
    if item.parent_attempt is not None and state.parent is not None \
            and item.request_id not in state.retry_ids:
        state.parent = replace(state.parent, attempt=item.parent_attempt)
    return engine.retry(state, now, item.request_id)


def handoff_keys(items: Iterable[CompletionQueueMessage]) -> frozenset[str]:
    """Outbox keys that applied control messages hand over for sending."""
    return frozenset(k for m in items if isinstance(m, ControlMessage) for k in m.send)

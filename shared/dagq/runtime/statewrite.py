"""One conditional state write: a delta appended, or a new snapshot when compaction is due.

``dagq.core.engine.journal`` decides which; this module runs it on the store and keeps the
state's change records in step with what the store now holds.
"""

from __future__ import annotations

from dagq.core.engine import WorkflowState
from dagq.core.engine.journal import encode_write, mark_stored
from dagq.ports import StateStore


def write_state(states: StateStore, workflow_id: str, state: WorkflowState,
                etag: str) -> tuple[str, int]:
    """Store what ``state`` changed under ``etag``; the new ETag and the bytes written.
    Raises what the store raises (``PreconditionFailed``, ``NotFound``, outages); after
    any error the caller must drop ``state``: its change records no longer match."""
    kind, data = encode_write(state, states.max_journal)
    if kind == "append":
        new = states.append(workflow_id, data, etag)
        mark_stored(state, None, len(data))
    else:
        new = states.replace(workflow_id, data, etag)
        mark_stored(state, len(data))
    return new, len(data)

"""What poison isolation, the sweep and cancels need of the coordinator's write protocol.

``Committing`` is the narrow view they take (``dagq.runtime.commit.Committer`` is the
implementation): commit a mutation to one workflow, turn queue messages into a mutation,
commit one workflow's messages with isolation, read an output reference. Taking this
instead of the coordinator keeps them below it in the import graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from dagq.core import engine
from dagq.core.engine import WorkflowState
from dagq.core.model import OutputRef
from dagq.protocol.messages import CompletionQueueMessage

Mutation = Callable[[WorkflowState], list[engine.Effects]]
"""Changes a workflow's state in place (through the pure core) and says what changed."""


class Committing(Protocol):
    """Applies changes to stored workflows, sends what they decided and updates the index."""

    def commit(self, workflow_id: str, mutate: Mutation,
               handoff: frozenset[str] = ...) -> list[engine.Effects] | None:
        """Apply ``mutate`` under ETag CAS, send the new outbox entries, update the index;
        the effects, or None when the write kept conflicting."""
        ...

    def applier(self, items: list[CompletionQueueMessage]) -> Mutation:
        """The mutation that applies ``items`` to a state."""
        ...

    def commit_group(self, workflow_id: str,
                     items: list[CompletionQueueMessage]) -> list[engine.Effects] | None:
        """``commit`` one workflow's messages, isolating a failure to that workflow."""
        ...

    def wake(self, holders: list[str]) -> None:
        """Send the held outbox entries ``holders`` (dispatch keys waiting for a slot of
        a concurrency key, ``dagq.runtime.slots``)."""
        ...

    def resolve(self, ref: OutputRef) -> Any:
        """The value an output reference names (read and verified)."""
        ...

"""Dead-lettered messages that stall workflows, and the two ways to unstall them.

A dead-lettered task message or completion leaves its attempt ``running`` until its
timeout (or for ever without one). ``stalled`` finds those attempts (``dagq doctor``
reports them); ``redrive`` sends such a message again (when its cause is gone) and
``fail_attempt`` reports the attempt failed so the workflow moves on (retries and
dependency policies apply as for any failure). ``dagq deadletters`` is the command.
"""

from __future__ import annotations

from dataclasses import dataclass

from dagq.core.engine import loads
from dagq.errors import DagqError
from dagq.ports import Backend, Message
from dagq.protocol import names
from dagq.protocol.messages import (
    CompletionMessage,
    attempt_named_in,
    decode_completion_queue,
    decode_task,
)


@dataclass(frozen=True)
class Stalled:
    """A dead-lettered message whose attempt is still ``running`` in its workflow."""

    queue: str
    message: Message
    reason: str
    workflow_id: str
    task: str
    attempt: int

    @property
    def key(self) -> str:
        """The dispatch key ``workflow/task/attempt``."""
        return f"{self.workflow_id}/{self.task}/{self.attempt}"


def stalled(backend: Backend, limit: int = 100,
            queues: list[str] | None = None) -> list[Stalled]:
    """Dead-lettered messages (of every queue, or of ``queues``) whose attempt still waits
    for them."""
    found: list[Stalled] = []
    for queue in backend.queues.names() if queues is None else queues:
        for msg, reason in backend.queues.get(queue).dead_letters(limit=limit):
            target = _attempt_of(queue, msg.body) or (
                names.attempt_of_done_id(msg.id) if queue == names.COMPLETIONS else None)
            if target is not None and _waiting(backend, *target):
                found.append(Stalled(queue, msg, reason, *target))
    return found


def _attempt_of(queue: str, body: bytes) -> tuple[str, str, int] | None:
    try:
        if queue == names.COMPLETIONS:
            item = decode_completion_queue(body)
            if not isinstance(item, CompletionMessage):
                return None
            return item.workflow_id, item.task, item.attempt
        task = decode_task(body)
        return task.workflow_id, task.task, task.attempt
    except DagqError:
        return attempt_named_in(body)


def _waiting(backend: Backend, workflow_id: str, task: str, attempt: int) -> bool:
    try:
        state = loads(backend.states.read(workflow_id)[0])
    except Exception:  # gone or unreadable: nothing waits
        return False
    return (task, attempt) in state.running()


def fail_attempt(backend: Backend, item: Stalled) -> None:
    """Report ``item``'s attempt failed (the coordinator applies it like any failure)."""
    body = CompletionMessage(
        item.workflow_id, item.task, item.attempt, success=False,
        error=f"failed by 'dagq deadletters fail': its message was dead-lettered "
              f"({item.reason})").encode()
    backend.queues.get(names.COMPLETIONS).send(
        body, message_id=names.bounded(f"{item.key}/deadletter-failed"),
        session_id=names.session_id(item.workflow_id))


def redrive(backend: Backend, item: Stalled) -> None:
    """Send ``item``'s message to its queue again."""
    backend.queues.get(item.queue).send(item.message.body, session_id=(
        names.session_id(item.workflow_id) if item.queue == names.COMPLETIONS else None))

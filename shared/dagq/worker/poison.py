"""Poison attempts: an attempt whose message keeps coming back without a result.

Its workers died each time (killed for memory, say). Rather than letting the queue
dead-letter the message, which would leave the workflow waiting for ever, the worker that
receives it for the ``DAGQ_MAX_DELIVERIES``-th time reports the attempt failed (so the
task's retries apply) and deletes the message.
"""

from __future__ import annotations

import logging
from collections import Counter

from dagq.ports import Message, Queue
from dagq.protocol import names
from dagq.protocol.messages import CompletionMessage, TaskMessage

log = logging.getLogger("dagq.worker")


def give_up(queue: Queue, completions: Queue, msg: Message, task: TaskMessage, worker_id: str,
            max_deliveries: int, stats: Counter[str]) -> None:
    """Fail ``task``'s attempt (a completion naming why) and delete its message."""
    error = (f"attempt {task.attempt} was delivered {msg.delivery_count} times without "
             "finishing (the worker running it died or was killed each time; "
             f"DAGQ_MAX_DELIVERIES={max_deliveries})")
    log.warning("failing %s: %s", task.key, error)
    completion = CompletionMessage(task.workflow_id, task.task, task.attempt,
                                   success=False, error=error, worker=worker_id)
    completions.send(completion.encode(), message_id=names.done_id(task.key),
                     session_id=names.session_id(task.workflow_id))
    queue.delete(msg)
    stats["failed"] += 1
    stats["poisoned"] += 1

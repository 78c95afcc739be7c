"""The completion-queue protocol's names: logical queues, message ids and session ids.

Every send site builds its ids here, so de-duplication (a broker drops a repeated message
id inside its window) and ordering (Service Bus delivers one session's messages in order
to one receiver) rest on these functions alone. Ids are bounded by construction: Service
Bus rejects a ``message_id`` or ``session_id`` over 128 characters
(https://learn.microsoft.com/azure/service-bus-messaging/service-bus-quotas, "Message ID"
and "Session ID" size), so a longer id is replaced by a deterministic short form that
keeps its start readable and ends in a digest of the whole.

This module imports only the pure core, so backends may use it too.
"""

from __future__ import annotations

import hashlib

from dagq.core.rules import COMPLETIONS_QUEUE as COMPLETIONS
from dagq.core.rules import DEADLETTER_QUEUE as DEADLETTER
from dagq.core.rules import EVENTS_QUEUE as EVENTS
from dagq.core.rules import NOTIFICATIONS_QUEUE as NOTIFICATIONS
from dagq.core.rules import RESERVED_QUEUES

__all__ = ["COMPLETIONS", "DEADLETTER", "EVENTS", "MAX_ID_LENGTH", "NOTIFICATIONS",
           "RESERVED_QUEUES",
           "attempt_of_done_id", "bounded",
           "child_retry_request_id", "control_id", "done_id", "notice_id", "request_id",
           "session_id", "submit_failed_id", "task_message_id"]

MAX_ID_LENGTH = 128
"""Longest message or session id Service Bus accepts."""
_DIGEST = 32


def bounded(identifier: str) -> str:
    """``identifier`` itself when it fits ``MAX_ID_LENGTH``, else a deterministic short
    form: its first characters, ``~``, and 32 hex digits of its SHA-256."""
    if len(identifier) <= MAX_ID_LENGTH:
        return identifier
    digest = hashlib.sha256(identifier.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST]
    return f"{identifier[:MAX_ID_LENGTH - _DIGEST - 1]}~{digest}"


def session_id(workflow_id: str) -> str:
    """Session of every completion-queue message about ``workflow_id``."""
    return bounded(workflow_id)


def task_message_id(dispatch_key: str) -> str:
    """Id of the task message of one dispatch (``{workflow}/{task}/{attempt}``)."""
    return bounded(dispatch_key)


def task_id_prefixes(workflow_id: str) -> tuple[str, ...]:
    """What the ids of the task messages of ``workflow_id`` and of its child workflows
    (``{id}~task~attempt``, ``dagq.core.engine.child_workflow_id``) start with, a long id
    cut where ``bounded`` keeps it (a receive filter of ``dagq run``'s workers)."""
    keep = MAX_ID_LENGTH - _DIGEST - 1
    return tuple(dict.fromkeys(f"{workflow_id}{sep}"[:keep] for sep in ("/", "~")))


def resent_id(dispatch_key: str, at: float) -> str:
    """Id of a copy of a lost task message sent again at ``at``: a fresh id, because
    queues that drop repeated ids (Service Bus, the embedded store) would drop it."""
    return bounded(f"{dispatch_key}/resent-{int(at)}")


def done_id(dispatch_key: str) -> str:
    """Id of a worker's completion of one dispatch."""
    return bounded(f"{dispatch_key}/done")


def attempt_of_done_id(message_id: str) -> tuple[str, str, int] | None:
    """``(workflow, task, attempt)`` named by a ``done_id`` that was not shortened (how a
    completion too broken to decode can still be traced to its attempt), else None."""
    if not message_id.endswith("/done") or len(message_id) >= MAX_ID_LENGTH:
        return None
    workflow_id, _, rest = message_id.removesuffix("/done").partition("/")
    task, _, attempt = rest.rpartition("/")
    if not (workflow_id and task and attempt.isdigit()):
        return None
    return workflow_id, task, int(attempt)


def submit_failed_id(dispatch_key: str) -> str:
    """Id of the completion sent when a child workflow could not be submitted."""
    return bounded(f"{dispatch_key}/submit-failed")


def notice_id(notice_key: str) -> str:
    """Id of a child workflow's notice to its parent (the outbox key)."""
    return bounded(notice_key)


def control_id(request_id: str, action: str) -> str:
    """Id of a control message (start, cancel, retry) of one request."""
    return bounded(f"{request_id}/{action}")


def request_id(workflow_id: str, action: str, nonce: str) -> str:
    """A fresh request id for ``action`` on ``workflow_id`` (``nonce`` makes it unique)."""
    return bounded(f"{workflow_id}/{action}/{nonce}")


def child_retry_request_id(child_id: str, dispatch_key: str) -> str:
    """Request id of the retry a parent's new attempt sends to its failed child."""
    return bounded(f"{child_id}/retry/by/{dispatch_key}")

"""Turns outbox entries into messages: task dispatches, child submissions, parent notices.

Sending is idempotent by key: task messages carry the dispatch key as message id, a child
workflow's id is derived from its parent task and attempt, and notices use fixed ids.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from typing import Any

from dagq.client import COMPLETIONS, WorkflowClient
from dagq.compose.factory import resolve_child
from dagq.core import engine
from dagq.core.engine.state import WorkflowState
from dagq.core.model import OutputRef, TaskDef, WorkflowDef
from dagq.core.params import render_kwargs
from dagq.errors import DagqError, NotFound
from dagq.ports import Backend
from dagq.protocol.messages import (
    MAX_TASK_MESSAGE_BYTES,
    CompletionMessage,
    TaskMessage,
    ref_to_json,
)

log = logging.getLogger("dagq.dispatch")


_DEFS: dict[int, tuple[WorkflowDef, dict[str, TaskDef]]] = {}


def task_defs(defn: WorkflowDef) -> dict[str, TaskDef]:
    """Tasks of ``defn`` by name (memoised for the last few definitions)."""
    _cache = _DEFS
    hit = _cache.get(id(defn))
    if hit is not None and hit[0] is defn:
        return hit[1]
    table = {t.name: t for t in defn.tasks}
    if len(_cache) > 64:
        _cache.clear()
    _cache[id(defn)] = (defn, table)
    return table


class OutboxSender:
    """Sends outbox entries of a state that was just written."""

    def __init__(self, backend: Backend, client: WorkflowClient) -> None:
        self.backend = backend
        self.client = client

    def send(self, state: WorkflowState, entries: Iterable[engine.OutboxEntry]) -> set[str]:
        """Send every entry; returns the keys sent."""
        now = time.time()
        by_queue: dict[str, list[tuple[bytes, float, str | None]]] = {}
        sent: set[str] = set()
        for entry in entries:
            payload: Any = entry.payload
            if entry.kind == "dispatch":
                delay = max(0.0, entry.written_at + payload.delay_s - now)
                body = self.task_message(state, payload)
                by_queue.setdefault(payload.queue, []).append((body, delay, entry.key))
            elif entry.kind == "child":
                self.submit_child(state, payload,
                                  max(0.0, entry.written_at + payload.delay_s - now))
            elif entry.kind == "notice":
                self.notify_parent(state, payload, entry.key)
            else:
                log.error("unknown outbox entry kind %r (key %s)", entry.kind, entry.key)
                continue
            sent.add(entry.key)
        for queue, items in by_queue.items():
            self.backend.queues.get(queue).send_many(items)
        return sent

    def task_message(self, state: WorkflowState, d: engine.Dispatch) -> bytes:
        """The encoded task message for dispatch ``d``."""
        tdef = task_defs(state.definition)[d.task]
        inputs = {name: ref_to_json(v) if isinstance(v, OutputRef) else v
                  for name, v in state.inputs_of(d.task).items()}
        msg = TaskMessage(
            workflow_id=state.workflow_id, task=d.task, attempt=d.attempt, key=d.key,
            kwargs=render_kwargs(tdef.kwargs, state.definition.params),
            timeout_s=d.timeout_s, inputs=inputs,
            params=dict(state.definition.params),
        )
        body = msg.encode()
        if len(body) <= MAX_TASK_MESSAGE_BYTES:
            return body
        data = json.dumps(inputs, separators=(",", ":")).encode()
        name = f"inputs/{d.key}.json"
        md5 = self.backend.outputs.put(name, data)
        ref = OutputRef(name, md5, len(data))
        return TaskMessage(
            workflow_id=msg.workflow_id, task=msg.task, attempt=msg.attempt, key=msg.key,
            kwargs=msg.kwargs, timeout_s=msg.timeout_s, inputs={}, inputs_ref=ref,
            params=msg.params,
        ).encode()

    def submit_child(self, state: WorkflowState, c: engine.ChildSubmit,
                     delay_s: float = 0.0) -> None:
        """Submit the child workflow of ``c`` (or retry the failed child of an earlier
        attempt); if that is impossible, fail the parent task at once."""
        tdef = task_defs(state.definition)[c.task]
        parent = engine.ParentLink(state.workflow_id, c.task, c.attempt)
        try:
            if tdef.workflow is None:
                raise DagqError(f"task {c.task!r} has no child workflow")
            if self._retry_previous_child(state, c, parent):
                return
            child = resolve_child(tdef.workflow)
            self.client.submit(child, workflow_id=c.child_id, parent=parent,
                               start_delay_s=delay_s)
        except Exception as exc:  # a child that cannot be submitted fails its parent task
            log.warning("child workflow %s of %s could not be submitted: %s",
                        c.child_id, state.workflow_id, exc)
            body = CompletionMessage(
                state.workflow_id, c.task, c.attempt, success=False,
                error=f"child workflow {c.child_id} could not be submitted: {exc}",
            ).encode()
            self.backend.queues.get(COMPLETIONS).send(
                body, message_id=f"{c.key}/submit-failed", session_id=state.workflow_id)

    def _retry_previous_child(self, state: WorkflowState, c: engine.ChildSubmit,
                              parent: engine.ParentLink) -> bool:
        """After a retry of the parent, re-run the failed parts of the latest earlier child
        instead of starting a fresh one. Returns True if such a child was retried."""
        for attempt in range(c.attempt - 1, 0, -1):
            old_id = engine.child_workflow_id(state.workflow_id, c.task, attempt)
            try:
                row = self.backend.index.get(old_id)
            except NotFound:
                continue
            if row.status not in ("failed", "cancelled"):
                return False
            self.client.retry(old_id, parent=parent, request_id=f"{old_id}/retry/by/{c.key}")
            return True
        return False

    def notify_parent(self, state: WorkflowState, n: engine.ParentNotice, key: str) -> None:
        """Report the end of child workflow ``state`` to its parent as a completion."""
        body = CompletionMessage(
            n.parent_id, n.task, n.attempt, success=n.success, error=n.error,
            output={"workflow_id": state.workflow_id, "status": state.status},
        ).encode()
        self.backend.queues.get(COMPLETIONS).send(body, message_id=key, session_id=n.parent_id)

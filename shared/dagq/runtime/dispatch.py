"""Turns outbox entries into messages: task dispatches, child submissions, parent notices.

Sending is idempotent by key: task messages carry the dispatch key as message id, a child
workflow's id is derived from its parent task and attempt, and notices use fixed ids.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from dagq.compose.factory import resolve_child
from dagq.core import engine, paths
from dagq.core.engine.state import WorkflowState
from dagq.core.mapping import with_item
from dagq.core.model import MappedOutputs, OutputRef
from dagq.core.params import render_kwargs
from dagq.errors import DagqError, NotFound
from dagq.outage import TRANSIENT
from dagq.ports import Backend, ChildWorkflows
from dagq.protocol import names
from dagq.protocol.messages import (
    MAX_TASK_MESSAGE_BYTES,
    CompletionMessage,
    TaskMessage,
    ref_to_json,
)
from dagq.runtime.cache_lookup import CacheLookup, Hit
from dagq.runtime.notify import Notifier
from dagq.runtime.slots import Slots, key_of, keyed

log = logging.getLogger("dagq.dispatch")


def _wire(value: Any) -> Any:
    """An input as it travels in a task message (stored outputs as reference objects,
    also inside the list of a mapped task's outputs)."""
    if isinstance(value, OutputRef):
        return ref_to_json(value)
    if type(value) is MappedOutputs:
        return [ref_to_json(v) if isinstance(v, OutputRef) else v for v in value]
    return value

SEND_CHUNK = 500
"""Task messages built and sent at a time: a 100,000-task fan-out never holds all its
messages in memory at once."""


class OutboxSender:
    """Sends outbox entries of a state that was just written."""

    def __init__(self, backend: Backend, children: ChildWorkflows,
                 clock: Callable[[], float] = time.time) -> None:
        self.backend = backend
        self.children = children
        self.cache = CacheLookup(backend, clock)
        self.slots = Slots(backend.records, clock)
        self.notify = Notifier(backend, children)

    def send(self, state: WorkflowState, entries: Iterable[engine.OutboxEntry]) -> set[str]:
        """Send every entry; returns the keys sent."""
        now = time.time()
        by_queue: dict[str, list[tuple[bytes, float, str | None]]] = {}
        dispatches: dict[str, list[engine.Dispatch]] = {}
        sent: set[str] = set()
        gated = keyed(state.definition)  # concurrency keys: dagq.runtime.slots
        for entry in entries:
            payload: Any = entry.payload
            if entry.kind == "dispatch":
                delay = max(0.0, entry.written_at + payload.delay_s - now)
                try:
                    body = self.task_message(state, payload)
                    if isinstance(body, Hit):
                        self.cache.answer(state, payload, body)
                        sent.add(entry.key)
                        continue
                    if gated and not self.admit(state, payload):
                        continue  # its key is full: the entry stays in the outbox
                except TRANSIENT:
                    raise
                except Exception as exc:  # e.g. a value no encoder takes: fail that task
                    self.fail_dispatch(state, payload, f"its task message cannot be built "
                                                       f"({type(exc).__name__}: {exc})")
                    sent.add(entry.key)
                    continue
                message_id = names.task_message_id(entry.key)
                batch = by_queue.setdefault(payload.queue, [])
                batch.append((body, delay, message_id))
                dispatches.setdefault(payload.queue, []).append(payload)
                if len(batch) >= SEND_CHUNK:  # bounded memory for a wide fan-out
                    self._send_many(state, payload.queue, by_queue.pop(payload.queue),
                                    dispatches.pop(payload.queue))
            elif entry.kind == "child":
                self.submit_child(state, payload,
                                  max(0.0, entry.written_at + payload.delay_s - now))
            elif entry.kind == "notice":
                self.notify_parent(state, payload, entry.key)
            elif entry.kind == "notify":  # workflow hooks: dagq.runtime.notify
                self.notify.send(state, payload, entry.written_at)
            else:
                log.error("unknown outbox entry kind %r (key %s)", entry.kind, entry.key)
                continue
            sent.add(entry.key)
        for queue, items in by_queue.items():
            self._send_many(state, queue, items, dispatches[queue])
        return sent

    def admit(self, state: WorkflowState, d: engine.Dispatch) -> bool:
        """Take a slot of ``d``'s concurrency key, if its task has one; False when the
        key is full (``ValueError`` when the key cannot be rendered)."""
        found = key_of(state, d.task)
        return found is None or self.slots.acquire(found[0], found[1], d.key)

    def _send_many(self, state: WorkflowState, queue: str,
                   items: list[tuple[bytes, float, str | None]],
                   dispatches: list[engine.Dispatch]) -> None:
        try:
            self.backend.queues.get(queue).send_many(items)
        except TRANSIENT:
            raise  # the outbox keeps the entries: they are re-sent after the outage
        except DagqError as exc:  # refused for good: fail those tasks, not the sender
            for d in dispatches:
                self.fail_dispatch(state, d, f"queue {queue!r} refused its task "
                                             f"message: {exc}")

    def fail_dispatch(self, state: WorkflowState, d: engine.Dispatch, why: str) -> None:
        """Report attempt ``d`` failed because its task message could not be sent."""
        log.error("%s: %s", d.key, why)
        body = CompletionMessage(state.workflow_id, d.task, d.attempt, success=False,
                                 error=f"the task could not be dispatched: {why}").encode()
        self.backend.queues.get(names.COMPLETIONS).send(
            body, message_id=names.done_id(d.key),
            session_id=names.session_id(state.workflow_id))

    def task_message(self, state: WorkflowState, d: engine.Dispatch) -> bytes | Hit:
        """The encoded task message for dispatch ``d`` (or the cache hit that answers it)."""
        tdef = state.task_def(d.task)
        raw = state.inputs_of(d.task)
        inputs = {name: _wire(v) for name, v in raw.items()}
        params = state.definition.params
        mapped, item = state.item_of(state.graph.index[d.task])
        if mapped:
            kwargs, values = with_item(tdef.kwargs, item)
            kwargs = render_kwargs(kwargs, {**params, **values})
        else:
            kwargs = render_kwargs(tdef.kwargs, params)
        cached, hit = self.cache.check(state, d, kwargs, raw, (mapped, item)) \
            if tdef.cache is not None or state.definition.cache is not None else (None, None)
        if hit is not None:
            return hit
        msg = TaskMessage(
            workflow_id=state.workflow_id, task=d.task, attempt=d.attempt, key=d.key,
            kwargs=kwargs, timeout_s=d.timeout_s, inputs=inputs, params=dict(params),
            mapped=mapped, item=item, cache=cached,
        )
        limit = self.backend.queues.get(d.queue).max_message_bytes
        body = msg.encode()
        if len(body) <= min(MAX_TASK_MESSAGE_BYTES, limit):
            return body
        spill = paths.input_spill_name(state.workflow_id, d.task, d.attempt)
        msg = replace(msg, inputs={}, inputs_ref=self._stash(spill, inputs))
        body = msg.encode()
        if len(body) <= limit:
            return body
        # still too large for this queue (long kwargs or params): store them all apart
        payload = {"kwargs": msg.kwargs, "inputs": inputs, "params": msg.params}
        name = paths.payload_spill_name(state.workflow_id, d.task, d.attempt)
        return replace(msg, kwargs={}, inputs={}, params={}, inputs_ref=None,
                       payload_ref=self._stash(name, payload)).encode()

    def _stash(self, name: str, value: object) -> OutputRef:
        data = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        return OutputRef(name, self.backend.outputs.put(name, data), len(data))

    def submit_child(self, state: WorkflowState, c: engine.ChildSubmit,
                     delay_s: float = 0.0) -> None:
        """Submit the child workflow of ``c`` (or retry the failed child of an earlier
        attempt); if that is impossible, fail the parent task at once."""
        tdef = state.task_def(c.task)
        parent = engine.ParentLink(state.workflow_id, c.task, c.attempt)
        try:
            if tdef.workflow is None:
                raise DagqError(f"task {c.task!r} has no child workflow")
            if self._retry_previous_child(state, c, parent):
                return
            child = resolve_child(tdef.workflow)
            self.children.submit(child, workflow_id=c.child_id, parent=parent,
                                 start_delay_s=delay_s)
        except Exception as exc:  # a child that cannot be submitted fails its parent task
            log.warning("child workflow %s of %s could not be submitted: %s",
                        c.child_id, state.workflow_id, exc)
            body = CompletionMessage(
                state.workflow_id, c.task, c.attempt, success=False,
                error=f"child workflow {c.child_id} could not be submitted: {exc}",
            ).encode()
            self.backend.queues.get(names.COMPLETIONS).send(
                body, message_id=names.submit_failed_id(c.key),
                session_id=names.session_id(state.workflow_id))

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
            self.children.retry(old_id, parent=parent,
                                request_id=names.child_retry_request_id(old_id, c.key))
            return True
        return False

    def notify_parent(self, state: WorkflowState, n: engine.ParentNotice, key: str) -> None:
        """Report the end of child workflow ``state`` to its parent as a completion."""
        body = CompletionMessage(
            n.parent_id, n.task, n.attempt, success=n.success, error=n.error,
            output={"workflow_id": state.workflow_id, "status": state.status},
        ).encode()
        self.backend.queues.get(names.COMPLETIONS).send(
            body, message_id=names.notice_id(key), session_id=names.session_id(n.parent_id))

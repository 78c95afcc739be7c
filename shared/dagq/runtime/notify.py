"""The outbox side of workflow hooks: what a ``notify`` entry sends once its state is stored.

The engine records one ``notify`` outbox entry when a run with hooks reaches a terminal
status (``dagq.core.hooks``). Sending it, like every outbox entry, happens after the
state write and is repeated until the entry is cleared (``OutboxSender``), so every
step here is idempotent by the event id:

- each webhook and the ``events`` hook becomes one ``Delivery`` message on the
  ``notifications`` queue (message id = delivery id), made later by the delivery loop
  (``dagq.runtime.webhooks``): no HTTP call is ever made on the state write path;
- an exit handler (``task``) is submitted as its own workflow
  ``{id}~{field}~{N}`` with the event's data as the completed input ``workflow``
  (a submit under the same id and definition is a no-op).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from dagq.core import engine
from dagq.core.engine.state import WorkflowState
from dagq.core.hooks import (
    DEFAULT_SECRET_ENV,
    SUMMARY_INPUT,
    event_data,
    fired,
    handler_definition,
)
from dagq.crashpoints import crash_point
from dagq.errors import DagqError
from dagq.outage import TRANSIENT
from dagq.ports import Backend, ChildWorkflows
from dagq.protocol import events, names

log = logging.getLogger("dagq.notify")


def handler_id(workflow_id: str, field: str, number: int) -> str:
    """The id of the exit handler run of event ``number`` of ``workflow_id``."""
    return engine.child_workflow_id(workflow_id, field, number)


def event_document(state: WorkflowState, e: engine.NotifyEvent, at: float) -> dict[str, Any]:
    """The event document of ``e`` (built from the entry, not the current state: a
    re-send after a retry of the run still says what happened then)."""
    handlers = {field: handler_id(state.workflow_id, field, e.number)
                for field, hook in fired(state.definition, e.status) if "task" in hook}
    data = event_data(state.workflow_id, state.definition.name, e.status, e.counts, e.failed,
                      e.failed_total, state.created_at, at, handlers)
    if state.parent is not None:
        data["parent_id"] = state.parent.workflow_id
    return events.document(e.key, state.workflow_id, e.status, at, data)


class Notifier:
    """Sends ``notify`` outbox entries: deliveries queued, exit handlers submitted."""

    def __init__(self, backend: Backend, children: ChildWorkflows) -> None:
        self.backend = backend
        self.children = children

    def send(self, state: WorkflowState, e: engine.NotifyEvent, written_at: float) -> None:
        """Queue the deliveries of event ``e`` and submit its exit handlers. Outages are
        raised (the entry stays in the outbox); anything else is logged, never raised."""
        doc = event_document(state, e, written_at)
        hooks = fired(state.definition, e.status)
        items: list[events.Delivery] = []
        for field, hook in hooks:
            webhook = hook.get("webhook")
            if isinstance(webhook, Mapping):
                items.append(events.Delivery(
                    events.delivery_id(e.key, field), "webhook", doc,
                    str(webhook.get("url", "")),
                    str(webhook.get("secret_env", DEFAULT_SECRET_ENV))))
        if any(hook.get("event") is True for _, hook in hooks):  # one message per event
            items.append(events.Delivery(events.delivery_id(e.key, "event"), "event", doc))
        if items:
            self.backend.queues.get(names.NOTIFICATIONS).send_many(
                (d.encode(), 0.0, names.bounded(d.id)) for d in items)
            crash_point("notify_after_queue")
        for field, hook in hooks:
            task = hook.get("task")
            if isinstance(task, Mapping):
                self.submit_handler(state, e, field, task, doc["data"])

    def submit_handler(self, state: WorkflowState, e: engine.NotifyEvent, field: str,
                       task: Mapping[str, Any], data: dict[str, Any]) -> None:
        """Start the exit handler run (idempotent by its id)."""
        run_id = handler_id(state.workflow_id, field, e.number)
        try:
            defn = handler_definition(state.definition, field, task)
            self.children.submit(defn, workflow_id=run_id, parent=None,
                                 reuse={SUMMARY_INPUT: (data, None, e.key)})
        except TRANSIENT:
            raise
        except DagqError as exc:  # e.g. an IdConflict or a handler that does not validate
            log.error("the %s handler %s of %s could not be started: %s", field, run_id,
                      state.workflow_id, exc)

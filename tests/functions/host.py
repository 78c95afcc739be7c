"""Plays the Functions host in tests: builds the runtime's own message classes, calls the
handlers in-process, and settles queue messages the way the host would."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import azure.functions as func
from azure.functions.queue import QueueMessage
from azure.functions.servicebus import ServiceBusMessage

from dagq.ports import Backend, Message
from dagq.protocol.names import COMPLETIONS

Handler = Callable[..., Any]


def user_functions(app: func.FunctionApp) -> dict[str, Handler]:
    """Name -> user function (``get_functions()`` may be called once per app)."""
    return {str(f.get_function_name()): f.get_user_function() for f in app.get_functions()}


def app_of(*blueprints: func.Blueprint) -> func.FunctionApp:
    """A FunctionApp with ``blueprints`` registered."""
    app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
    for bp in blueprints:
        app.register_functions(bp)
    return app


def http(fn: Handler, method: str, path: str, *, body: bytes = b"",
         params: Mapping[str, str] | None = None, route: Mapping[str, str] | None = None,
         content_type: str | None = "application/yaml",
         headers: Mapping[str, str] | None = None) -> tuple[int, Any]:
    """Call an HTTP handler; returns the status and the decoded JSON body."""
    all_headers = dict(headers or {})
    if content_type is not None:
        all_headers.setdefault("Content-Type", content_type)
    req = func.HttpRequest(method, f"https://app.example/api/{path}", headers=all_headers,
                           params=dict(params or {}), route_params=dict(route or {}),
                           body=body)
    resp = fn(req)
    assert isinstance(resp, func.HttpResponse)
    assert resp.mimetype == "application/json", resp.mimetype
    return resp.status_code, json.loads(resp.get_body())


def _workflow_of(body: bytes) -> str:
    try:
        value = json.loads(body)
    except ValueError:
        return ""
    return str(value.get("workflow_id", "")) if isinstance(value, dict) else ""


def deliver_storage_queue(fn: Handler, backend: Backend, max_messages: int = 32) -> int:
    """Receive from the completion queue and hand each message to the queue-triggered
    coordinator like the host: delete on success, make visible again on failure."""
    queue = backend.queues.get(COMPLETIONS)
    messages = queue.receive(max_messages, 30.0)
    for m in messages:
        trigger = QueueMessage(  # type: ignore[no-untyped-call]
            id=m.id, body=m.body, dequeue_count=m.delivery_count, pop_receipt=m.receipt)
        try:
            fn(trigger)
        except Exception:
            queue.release(m)
            raise
        queue.delete(m)
    return len(messages)


def sb_message(body: bytes, message_id: str, delivery_count: int = 1) -> ServiceBusMessage:
    """A Service Bus trigger message with the workflow id as session id."""
    return ServiceBusMessage(body=body, message_id=message_id,
                             session_id=_workflow_of(body) or None,
                             delivery_count=delivery_count, application_properties={},
                             user_properties={})


def deliver_servicebus(fn: Handler, backend: Backend, max_messages: int = 32) -> int:
    """Receive from the completion queue and hand the messages to the Service Bus-triggered
    coordinator one session (workflow) batch at a time; complete or abandon each batch."""
    queue = backend.queues.get(COMPLETIONS)
    messages = queue.receive(max_messages, 30.0)
    sessions: dict[str, list[Message]] = {}
    for m in messages:
        sessions.setdefault(_workflow_of(m.body), []).append(m)
    for batch in sessions.values():
        try:
            fn([sb_message(m.body, m.id, m.delivery_count) for m in batch])
        except Exception:
            for m in batch:
                queue.release(m)
            raise
        queue.delete_many(batch)
    return len(messages)


def assert_nothing_written(backend: Backend) -> None:
    """The store holds no workflow, no state and no queued message."""
    assert backend.index.query() == []
    assert list(backend.states.list_ids()) == []
    assert backend.queues.get(COMPLETIONS).approximate_count() == 0

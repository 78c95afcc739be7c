"""The dead-letter queue ``{p}-deadletter`` shared by every Storage queue of a store.

Each dead letter is a JSON envelope naming the source queue, the reason and the original
message. A body too large to fit the envelope into one queue message is stored in output
storage under ``deadletter/{queue}/{message id}`` and referenced instead.

Listing peeks (which hides nothing) when the queue holds at most 32 messages, the most one
peek returns. Beyond that it receives page after page (each receive hides what it returns,
so the next page brings new envelopes) and then makes every envelope visible again: two
requests per dead letter, acceptable for an operator's occasional listing.
"""

from __future__ import annotations

import base64
import json
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from typing import Any

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.storage.queue import QueueClient, QueueMessage

from dagq.backends.azure.errors import Guard
from dagq.core.paths import segment
from dagq.errors import NotFound
from dagq.ports import Message, OutputStore

MAX_ENVELOPE = 48 * 1024
PEEK_MAX = 32
SCAN_VISIBILITY = 60
SCAN_PAGES = 50
MAX_REASON = 2000


class DeadLetters:
    """Writes and lists dead letters of every queue of one store."""

    def __init__(self, client: QueueClient, guard: Guard, outputs: OutputStore,
                 pool: ThreadPoolExecutor) -> None:
        self._client = client
        self._guard = guard
        self._outputs = outputs
        self._pool = pool

    def add(self, queue: str, message: Message, reason: str) -> None:
        """Record ``message`` of ``queue`` as dead with ``reason``."""
        envelope: dict[str, Any] = {
            "v": 1, "queue": queue, "reason": reason[:MAX_REASON], "id": message.id,
            "delivery_count": message.delivery_count, "enqueued_at": message.enqueued_at,
            "dead_lettered_at": time.time(),
            "body": base64.b64encode(message.body).decode("ascii"), "body_ref": None,
        }
        data = json.dumps(envelope).encode()
        if len(data) > MAX_ENVELOPE:
            ref = f"deadletter/{segment(queue)}/{segment(message.id)}"
            self._outputs.put(ref, message.body)
            envelope.update(body=None, body_ref=ref)
            data = json.dumps(envelope).encode()
        with self._guard(f"dead-lettering message {message.id} of queue {queue!r}"):
            try:
                self._client.send_message(data, time_to_live=-1)
            except ResourceNotFoundError:
                with suppress(ResourceExistsError):
                    self._client.create_queue()
                self._client.send_message(data, time_to_live=-1)

    def entries(self, queue: str, limit: int) -> list[tuple[Message, str]]:
        """Up to ``limit`` dead letters of ``queue`` with their reasons, oldest first."""
        out: list[tuple[Message, str]] = []
        for raw in self._read():
            env = json.loads(bytes(raw.content or b"{}"))
            if env.get("queue") != queue:
                continue
            out.append((self._message(env), str(env.get("reason", ""))))
            if len(out) >= limit:
                break
        return out

    def _read(self) -> list[QueueMessage]:
        with self._guard(f"reading dead letters from {self._client.queue_name!r}"):
            try:
                peeked = list(self._client.peek_messages(max_messages=PEEK_MAX))
            except ResourceNotFoundError:
                return []
            if len(peeked) < PEEK_MAX:
                return peeked
            seen: list[QueueMessage] = []
            try:
                for page in self._client.receive_messages(
                        messages_per_page=PEEK_MAX, visibility_timeout=SCAN_VISIBILITY).by_page():
                    items = list(page)
                    seen.extend(items)
                    if len(items) < PEEK_MAX or len(seen) >= SCAN_PAGES * PEEK_MAX:
                        break
            finally:
                list(self._pool.map(self._show, seen))
            return seen

    def _show(self, m: QueueMessage) -> None:
        with suppress(ResourceNotFoundError):
            self._client.update_message(m.id, m.pop_receipt, visibility_timeout=0)

    def _message(self, env: dict[str, Any]) -> Message:
        if env.get("body_ref"):
            try:
                body = self._outputs.get(env["body_ref"])
            except NotFound:
                body = b""
        else:
            body = base64.b64decode(env.get("body") or "")
        return Message(id=str(env.get("id", "")), body=body, receipt="",
                       delivery_count=int(env.get("delivery_count", 0)),
                       enqueued_at=float(env.get("enqueued_at", 0.0)))

"""Task and completion queues on Azure Storage Queues.

Wire format: every dagq queue carries base64 of the raw body (what a Functions queue
trigger decodes by default), so bodies may be any bytes up to 48 KiB (64 KiB encoded).

Semantics on top of the service:

- Storage Queues have no message ids of their own choosing and no duplicate detection
  (the engine tolerates duplicate deliveries). To still report the sender's id as
  ``Message.id``, a task-queue message sent with an id is framed as
  ``FRAME + id + NUL + body``. The completion queue is never framed, because a Functions
  trigger reads its raw bodies; there ``Message.id`` is the service's id;
- delays are the initial visibility timeout of ``send`` (whole seconds, rounded up);
- ``receive`` takes up to 32 messages per request and emulates ``wait_s`` by polling
  with growing pauses (the service has no long polling);
- a message received more than ``max_deliveries`` times is moved to the store's
  dead-letter queue (see :mod:`.deadletter`) instead of being returned;
- ``release`` checks the receipt (one visibility update), sends a fresh copy and deletes
  the original. The service's dequeue count cannot be lowered, and a release must not
  count as a failed delivery, so the copy starts again at zero (a crash before the delete
  leaves a duplicate, which the engine tolerates).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress

from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.storage.queue import QueueClient, QueueMessage

from dagq.backends.azure.deadletter import DeadLetters
from dagq.backends.azure.errors import Guard, status_of
from dagq.core.limits import STORAGE_QUEUE_BODY_BYTES
from dagq.errors import NotFound, StoreError
from dagq.ports import Message

MAX_BODY = STORAGE_QUEUE_BODY_BYTES
PAGE = 32
NEVER_EXPIRE = -1
FRAME = b"\x00dagq-id\x00"
RELEASE_HOLD = 30


def frame(body: bytes, message_id: str | None) -> bytes:
    """The stored form of ``body`` sent with ``message_id`` on a framed queue."""
    if message_id is None and not body.startswith(FRAME):
        return body
    tag = (message_id or "").encode()
    framed = FRAME + tag + b"\x00" + body
    if b"\x00" in tag or len(framed) > MAX_BODY:
        if body.startswith(FRAME):
            raise StoreError("a message body may not start with dagq's id frame marker")
        return body  # no room for the id: the service's id will stand in
    return framed


def unframe(raw: bytes) -> tuple[str | None, bytes]:
    """The sender's id (if framed) and the body of a stored task-queue message."""
    if not raw.startswith(FRAME):
        return None, raw
    tag, _, body = raw[len(FRAME):].partition(b"\x00")
    return tag.decode() or None, body


def _seconds(value: float, minimum: int = 0) -> int:
    return max(minimum, math.ceil(value))


def _receipt_mismatch(exc: HttpResponseError) -> bool:
    return status_of(exc) == 400 and getattr(exc, "error_code", None) == "PopReceiptMismatch"


def make_receipt(service_id: str, pop_receipt: str) -> str:
    """A ``Message.receipt``: the service's message id and the pop receipt."""
    return f"{service_id} {pop_receipt}"


def split_receipt(receipt: str) -> tuple[str, str]:
    """The service's message id and pop receipt of a ``Message.receipt``."""
    service_id, _, pop_receipt = receipt.partition(" ")
    return service_id, pop_receipt


def to_message(m: QueueMessage, framed: bool) -> Message:
    """A port ``Message`` from a received Storage queue message."""
    enqueued = m.inserted_on.timestamp() if m.inserted_on else 0.0
    raw = bytes(m.content or b"")
    sender_id, body = unframe(raw) if framed else (None, raw)
    return Message(id=sender_id or str(m.id), body=body,
                   receipt=make_receipt(str(m.id), str(m.pop_receipt)),
                   delivery_count=int(m.dequeue_count or 1), enqueued_at=enqueued)


class StorageQueue:
    """One ``Queue`` on a Storage queue (created by the first send that finds it missing)."""

    def __init__(self, name: str, client: QueueClient, guard: Guard, dead: DeadLetters,
                 max_deliveries: int, pool: ThreadPoolExecutor, framed: bool = True) -> None:
        self.name = name
        self.max_message_bytes = MAX_BODY
        self._framed = framed
        self._client = client
        self._guard = guard
        self._dead = dead
        self._max = max_deliveries
        self._pool = pool

    def send(self, body: bytes, *, delay_s: float = 0.0, message_id: str | None = None,
             session_id: str | None = None) -> None:
        """Enqueue ``body`` visible after ``delay_s``; ``message_id`` is carried on framed
        queues (not deduplicated), ``session_id`` is ignored."""
        if self._framed:
            body = frame(body, message_id)
        if len(body) > MAX_BODY:
            raise StoreError(
                f"a message of {len(body)} bytes does not fit queue {self.name!r}: Storage "
                f"Queues take at most {MAX_BODY} bytes (64 KiB base64-encoded); store large "
                "payloads in output storage and send a reference")
        visibility = _seconds(delay_s) or None
        with self._guard(f"sending to queue {self._physical!r}"):
            try:
                self._send(body, visibility)
            except ResourceNotFoundError:
                with suppress(ResourceExistsError):
                    self._client.create_queue()
                self._send(body, visibility)

    def send_many(self, items: Iterable[tuple[bytes, float, str | None]]) -> None:
        """Send every ``(body, delay_s, message_id)`` item, several at a time."""
        jobs = [self._pool.submit(self.send, b, delay_s=d, message_id=i) for b, d, i in items]
        for job in jobs:
            job.result()

    def receive(self, max_messages: int, visibility_timeout_s: float,
                wait_s: float = 0.0) -> list[Message]:
        """Up to ``max_messages`` messages hidden for ``visibility_timeout_s``; polls for
        up to ``wait_s`` seconds while the queue is empty."""
        deadline = time.monotonic() + wait_s
        pause = 0.05
        while True:
            got = self._receive_once(max_messages, _seconds(visibility_timeout_s, 1))
            remaining = deadline - time.monotonic()
            if got or remaining <= 0:
                return got
            time.sleep(min(pause, remaining))
            pause = min(pause * 2, 1.0)

    def delete(self, message: Message) -> None:
        """Remove ``message``; no-op if it is gone or another consumer holds it now."""
        with self._guard(f"deleting message {message.id} from queue {self._physical!r}"):
            try:
                self._client.delete_message(*split_receipt(message.receipt))
            except ResourceNotFoundError:
                return
            except HttpResponseError as exc:
                if not _receipt_mismatch(exc):  # mismatch: re-delivered to someone else
                    raise

    def delete_many(self, messages: Iterable[Message]) -> None:
        """Delete several messages, several at a time."""
        for job in [self._pool.submit(self.delete, m) for m in messages]:
            job.result()

    def extend(self, message: Message, visibility_timeout_s: float) -> Message:
        """Hide ``message`` for another ``visibility_timeout_s``; returns the new receipt."""
        service_id, pop_receipt = split_receipt(message.receipt)
        with self._guard(f"extending message {message.id} on queue {self._physical!r}"):
            try:
                updated = self._client.update_message(
                    service_id, pop_receipt,
                    visibility_timeout=_seconds(visibility_timeout_s))
            except HttpResponseError as exc:
                if status_of(exc) != 404 and not _receipt_mismatch(exc):
                    raise
                raise NotFound(
                    f"message {message.id} on queue {self._physical!r} was lost: it was "
                    "deleted, or became visible again and another consumer took it") from None
        receipt = make_receipt(service_id, str(updated.pop_receipt))
        return Message(id=message.id, body=message.body, receipt=receipt,
                       delivery_count=message.delivery_count, enqueued_at=message.enqueued_at)

    def release(self, message: Message) -> None:
        """Make the message available now without counting this delivery (copy + delete);
        raises ``NotFound`` if this receipt no longer holds the message."""
        held = self.extend(message, RELEASE_HOLD)
        self.send(message.body, message_id=message.id if self._framed else None)
        self.delete(held)

    def dead_letter(self, message: Message, reason: str) -> None:
        """Move ``message`` to the dead-letter queue with ``reason``."""
        self._dead.add(self.name, message, reason)
        self.delete(message)

    def approximate_count(self) -> int:
        """Messages waiting (visible or not), approximately."""
        with self._guard(f"reading the length of queue {self._physical!r}"):
            try:
                props = self._client.get_queue_properties()
            except ResourceNotFoundError:
                return 0
        return int(props.approximate_message_count or 0)

    def dead_letters(self, limit: int = 100) -> list[tuple[Message, str]]:
        """Dead-lettered messages of this queue with their reasons."""
        return self._dead.entries(self.name, limit)

    @property
    def _physical(self) -> str:
        return str(self._client.queue_name)

    def create(self) -> None:
        """Create the queue if it does not exist. An identity allowed to send but not to
        create queues (e.g. Storage Queue Data Message Sender) relies on the deployment
        having created it."""
        with self._guard(f"creating queue {self._physical!r}"), suppress(ResourceExistsError):
            try:
                self._client.create_queue()
            except HttpResponseError as exc:
                if getattr(exc, "error_code", None) != "AuthorizationPermissionMismatch":
                    raise

    def _send(self, body: bytes, visibility: int | None) -> None:
        self._client.send_message(body, visibility_timeout=visibility,
                                  time_to_live=NEVER_EXPIRE)

    def _receive_once(self, max_messages: int, visibility: int) -> list[Message]:
        if max_messages <= 0:
            return []
        per_page = min(PAGE, max_messages)
        raw: list[QueueMessage] = []
        with self._guard(f"receiving from queue {self._physical!r}"):
            try:
                pages = self._client.receive_messages(
                    messages_per_page=per_page, visibility_timeout=visibility,
                    max_messages=max_messages).by_page()
                for page in pages:  # stop early: each further page is a request
                    items = list(page)
                    raw.extend(items)
                    if len(items) < per_page or len(raw) >= max_messages:
                        break
            except ResourceNotFoundError:
                return []
        out: list[Message] = []
        for m in raw:
            message = to_message(m, self._framed)
            if message.delivery_count > self._max:
                self.dead_letter(message, f"delivered {message.delivery_count} times, more "
                                          f"than the limit of {self._max} (DAGQ_MAX_DELIVERIES)")
            else:
                out.append(message)
        return out

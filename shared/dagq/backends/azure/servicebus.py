"""Task and completion queues on Azure Service Bus (``DAGQ_QUEUES=sb://NAMESPACE``).

A thin mapping of the ``Queue`` port onto the SDK:

- ``message_id`` becomes the Service Bus message id (the queues are created with duplicate
  detection, so a repeated dispatch key is dropped by the broker);
- the completion queue requires sessions; ``session_id`` (the workflow id) keys them, so
  one consumer applies one workflow's completions at a time. Without an explicit one the
  body's ``workflow_id`` is used;
- delays use the scheduled enqueue time; the lock duration is the queue's, and a
  ``receive``/``extend`` asking for longer keeps renewing the message (or session) lock
  in the background (the SDK's ``AutoLockRenewer``) until that time has passed;
- ``release`` sends a copy (new broker id, the original id kept in the ``dagq_id``
  property) and completes the original: abandoning would count as a delivery, and the
  port promises a release does not; ``dead_letter`` uses the built-in dead-letter
  sub-queue with the reason;
- receipts are lock tokens; the received message objects stay here until settled.

Queues missing at the first send are created (this needs the Manage right; deployments
normally create them with the infrastructure templates).
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    AutoLockRenewer,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiver,
    ServiceBusSender,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import (
    MessageAlreadySettled,
    MessageLockLostError,
    MessageSizeExceededError,
    MessagingEntityAlreadyExistsError,
    MessagingEntityNotFoundError,
    OperationTimeoutError,
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    ServiceBusCommunicationError,
    ServiceBusConnectionError,
    ServiceBusError,
    SessionLockLostError,
)
from azure.servicebus.management import ServiceBusAdministrationClient

from dagq.backends.azure.errors import Guard, manage_right
from dagq.backends.azure.naming import StoreNames
from dagq.backends.azure.transport import Plumbing
from dagq.core.limits import SERVICE_BUS_STANDARD_MESSAGE_BYTES, service_bus_id_problem
from dagq.errors import DagqError, NotFound, StoreError, StoreUnavailable
from dagq.ports import Message
from dagq.protocol.names import COMPLETIONS
from dagq.protocol.names import session_id as workflow_session

MIN_WAIT = 1.0
MAX_BODY = SERVICE_BUS_STANDARD_MESSAGE_BYTES - 16 * 1024
"""Largest body sent: a Standard-tier message is at most 256 KiB including its headers
and properties (``dagq.core.limits``); 16 KiB are left for dagq's ids and the broker's
headers."""
ID_PROPERTY = "dagq_id"
_LOST = (MessageLockLostError, SessionLockLostError, MessageAlreadySettled)


def build_message(body: bytes, *, delay_s: float, message_id: str | None,
                  session_id: str | None, now: float,
                  original_id: str | None = None) -> ServiceBusMessage:
    """The Service Bus message for one ``send`` (``original_id``: the id a released copy
    keeps reporting)."""
    for value, what in ((message_id, "message id"), (session_id, "session id")):
        if value is not None and (problem := service_bus_id_problem(value, what)):
            raise StoreError(f"{problem}: {value[:60]!r}...")  # the SDK would raise ValueError
    props: dict[str | bytes, Any] | None = {ID_PROPERTY: original_id} if original_id else None
    message = ServiceBusMessage(body, message_id=message_id, session_id=session_id,
                                application_properties=props)
    if delay_s > 0:
        message.scheduled_enqueue_time_utc = dt.datetime.fromtimestamp(now + delay_s, dt.UTC)
    return message


def session_of(body: bytes, message_id: str | None) -> str:
    """Session for a completion-queue message sent without one: the body's workflow id."""
    try:
        workflow_id = json.loads(body).get("workflow_id")
    except (ValueError, AttributeError):
        workflow_id = None
    return workflow_session(str(workflow_id or message_id or "dagq"))


def to_message(m: ServiceBusReceivedMessage) -> Message:
    """A port ``Message`` from a received message (the broker counts prior deliveries)."""
    enqueued = m.enqueued_time_utc.timestamp() if m.enqueued_time_utc else 0.0
    props = m.application_properties or {}
    original = props.get(ID_PROPERTY.encode(), props.get(ID_PROPERTY))
    if isinstance(original, bytes):
        original = original.decode()
    return Message(id=str(original or m.message_id or m.sequence_number), body=b"".join(m.body),
                   receipt=str(m.lock_token), delivery_count=(m.delivery_count or 0) + 1,
                   enqueued_at=enqueued)


class ServiceBusQueue:
    """One ``Queue`` on a Service Bus queue."""

    def __init__(self, name: str, physical: str, owner: ServiceBusQueues) -> None:
        self.name = name
        self.max_message_bytes = MAX_BODY
        self._physical = physical
        self._o = owner
        self._sessions = name == COMPLETIONS
        self._lock = threading.RLock()
        self._sender: ServiceBusSender | None = None
        self._receiver: ServiceBusReceiver | None = None
        self._session_receivers: list[ServiceBusReceiver] = []
        self._inflight: dict[str, tuple[ServiceBusReceiver, ServiceBusReceivedMessage]] = {}
        self._received_at: dict[str, float] = {}

    def send(self, body: bytes, *, delay_s: float = 0.0, message_id: str | None = None,
             session_id: str | None = None) -> None:
        """Enqueue ``body`` (scheduled when ``delay_s`` > 0)."""
        self._send([self._build(body, delay_s, message_id, session_id)])

    def send_many(self, items: Iterable[tuple[bytes, float, str | None]]) -> None:
        """Send items in as few batches as the size limit allows."""
        self._send([self._build(b, d, i, None) for b, d, i in items])

    def receive(self, max_messages: int, visibility_timeout_s: float,
                wait_s: float = 0.0) -> list[Message]:
        """Up to ``max_messages`` locked messages (one session's, on the completion queue),
        kept locked for at least ``visibility_timeout_s`` (at least the queue's lock
        duration)."""
        wait = max(wait_s, MIN_WAIT)
        with self._lock, self._o.guard(f"receiving from queue {self._physical!r}"):
            receiver = self._open_receiver(wait)
            try:
                got = receiver.receive_messages(max_message_count=max_messages,
                                                max_wait_time=wait)
            except OperationTimeoutError:  # no session had messages
                got = []
            finally:
                self._o.plumbing.count("queue.receive")
            out = []
            for m in got:
                message = to_message(m)
                if message.delivery_count > self._o.max_deliveries:
                    why = (f"delivered {message.delivery_count} times, more than the limit "
                           f"of {self._o.max_deliveries} (DAGQ_MAX_DELIVERIES)")
                    receiver.dead_letter_message(m, reason=why, error_description=why)
                    self._o.plumbing.count("queue.delete")
                    continue
                self._inflight[message.receipt] = (receiver, m)
                self._received_at[message.receipt] = time.monotonic()
                if not self._sessions:
                    self._o.renewer.register(receiver, m, visibility_timeout_s)
                out.append(message)
            if self._sessions and not out:  # free the session for other consumers
                self._session_receivers.remove(receiver)
                receiver.close()
            elif self._sessions and receiver.session is not None:
                self._o.renewer.register(receiver, receiver.session, visibility_timeout_s)
            return out

    def delete(self, message: Message) -> None:
        """Complete the message; no-op if it is already settled or its lock was lost."""
        self._settle(message, "queue.delete", lambda r, m: r.complete_message(m))

    def delete_many(self, messages: Iterable[Message]) -> None:
        """Complete several messages."""
        for message in messages:
            self.delete(message)

    def extend(self, message: Message, visibility_timeout_s: float) -> Message:
        """Renew the lock of ``message`` (its session's lock on the completion queue)."""
        with self._lock, self._o.guard(f"renewing a lock on queue {self._physical!r}"):
            entry = self._inflight.get(message.receipt)
            try:
                if entry is None:
                    raise MessageLockLostError(message="not held by this process")
                receiver, m = entry
                held = time.monotonic() - self._received_at.get(message.receipt, time.monotonic())
                if self._sessions and receiver.session is not None:
                    receiver.session.renew_lock()
                    renewable: Any = receiver.session
                else:
                    receiver.renew_message_lock(m)
                    renewable = m
                self._o.plumbing.count("queue.update")
                self._o.renewer.register(receiver, renewable, held + visibility_timeout_s)
            except _LOST:
                self._inflight.pop(message.receipt, None)
                raise NotFound(f"message {message.id} on queue {self._physical!r} was lost: "
                               "settled, or its lock expired") from None
        return message

    def release(self, message: Message) -> None:
        """Send a copy that is delivered again now, then complete the original; raises
        ``NotFound`` if this process no longer holds the message."""
        entry = self._inflight.get(message.receipt)
        if entry is None:
            raise NotFound(f"message {message.id} on queue {self._physical!r} is not held "
                           "by this process (settled, or its lock expired)")
        copy = build_message(message.body, delay_s=0.0, message_id=uuid.uuid4().hex,
                             session_id=entry[1].session_id, now=time.time(),
                             original_id=message.id)
        self._send([copy])
        self.delete(message)

    def dead_letter(self, message: Message, reason: str) -> None:
        """Move the message to the queue's dead-letter sub-queue."""
        self._settle(message, "queue.delete", lambda r, m: r.dead_letter_message(
            m, reason=reason[:4000], error_description=reason[:4000]))

    def approximate_count(self) -> int:
        """Active messages: what receivers can take now, without dead-lettered, scheduled
        or transfer messages (``total_message_count`` would count those too). Needs the
        Manage right; without it ``StoreUnavailable`` says so."""
        what = f"reading the length of queue {self._physical!r}"
        with self._o.guard(what), manage_right(what):
            props = self._o.admin.get_queue_runtime_properties(self._physical)
            self._o.plumbing.count("queue.read")
        return int(props.active_message_count or 0)

    def dead_letters(self, limit: int = 100) -> list[tuple[Message, str]]:
        """Peek at the dead-letter sub-queue."""
        with self._o.guard(f"reading dead letters of queue {self._physical!r}"):
            with self._o.client.get_queue_receiver(
                    self._physical, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as receiver:
                peeked = receiver.peek_messages(max_message_count=limit)
            self._o.plumbing.count("queue.read")
        return [(to_message(m), m.dead_letter_reason or "") for m in peeked]

    def close(self) -> None:
        """Close the sender and receivers."""
        with self._lock:
            for link in [self._sender, self._receiver, *self._session_receivers]:
                if link is not None:
                    link.close()
            self._sender, self._receiver, self._session_receivers = None, None, []
            self._inflight.clear()
            self._received_at.clear()

    def _build(self, body: bytes, delay_s: float, message_id: str | None,
               session_id: str | None) -> ServiceBusMessage:
        if self._sessions and session_id is None:
            session_id = session_of(body, message_id)
        return build_message(body, delay_s=delay_s, message_id=message_id,
                             session_id=session_id, now=dt.datetime.now(dt.UTC).timestamp())

    def _send(self, messages: list[ServiceBusMessage]) -> None:
        with self._lock, self._o.guard(f"sending to queue {self._physical!r}"):
            try:
                self._send_batches(messages)
            except MessagingEntityNotFoundError:
                self._o.create(self._physical, sessions=self._sessions)
                self._send_batches(messages)

    def _send_batches(self, messages: list[ServiceBusMessage]) -> None:
        if self._sender is None:
            self._sender = self._o.client.get_queue_sender(self._physical)
        sender = self._sender
        batch = sender.create_message_batch()
        session: object = None
        for m in sorted(messages, key=lambda m: m.session_id or ""):  # a batch: one session
            if len(batch) and m.session_id != session:
                sender.send_messages(batch)
                self._o.plumbing.count("queue.send")
                batch = sender.create_message_batch()
            session = m.session_id
            try:
                batch.add_message(m)
            except MessageSizeExceededError:
                if len(batch) == 0:
                    raise StoreError(f"a message does not fit queue {self._physical!r}: "
                                     "store large payloads in output storage") from None
                sender.send_messages(batch)
                self._o.plumbing.count("queue.send")
                batch = sender.create_message_batch()
                batch.add_message(m)
        if len(batch):
            sender.send_messages(batch)
            self._o.plumbing.count("queue.send")

    def _open_receiver(self, wait: float) -> ServiceBusReceiver:
        if not self._sessions:
            if self._receiver is None:
                self._receiver = self._o.client.get_queue_receiver(self._physical)
            return self._receiver
        self._drop_idle_sessions()
        receiver = self._o.client.get_queue_receiver(
            self._physical, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=wait)
        self._session_receivers.append(receiver)
        return receiver

    def _drop_idle_sessions(self) -> None:
        busy = {id(r) for r, _ in self._inflight.values()}
        for r in [r for r in self._session_receivers if id(r) not in busy]:
            r.close()
            self._session_receivers.remove(r)

    def _settle(self, message: Message, kind: str, op: Any) -> None:
        with self._lock, self._o.guard(f"settling a message on queue {self._physical!r}"):
            entry = self._inflight.pop(message.receipt, None)
            self._received_at.pop(message.receipt, None)
            if entry is None:
                return
            try:
                op(*entry)
                self._o.plumbing.count(kind)
            except _LOST:
                pass


COMPLETION_LOCK_S = 300.0
"""Lock of a completion queue dagq creates: the most Service Bus allows, as the templates set."""


class ServiceBusQueues:
    """``Queues`` on one Service Bus namespace, names derived from the store prefix."""

    def __init__(self, client: ServiceBusClient, admin: ServiceBusAdministrationClient,
                 names: StoreNames, guard: Guard, plumbing: Plumbing,
                 max_deliveries: int, lock_duration_s: float = 60.0) -> None:
        self.client = client
        self.lock_duration_s = lock_duration_s
        self.renewer = AutoLockRenewer(max_workers=4)
        self.admin = admin
        self.names_ = names
        self._guard = guard
        self.plumbing = plumbing
        self.max_deliveries = max_deliveries
        self._queues: dict[str, ServiceBusQueue] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> ServiceBusQueue:
        """The queue called ``name``."""
        with self._lock:
            if name not in self._queues:
                self._queues[name] = ServiceBusQueue(name, self.names_.queue(name), self)
            return self._queues[name]

    def names(self) -> list[str]:
        """Logical names of the namespace's task queues of this store."""
        with self.guard("listing Service Bus queues"), manage_right("listing Service Bus queues"):
            found = [self.names_.logical(q.name) for q in self.admin.list_queues()]
            self.plumbing.count("queue.read")
        return sorted(n for n in found if n)

    def create(self, physical: str, *, sessions: bool) -> None:
        """Create a queue with duplicate detection (and sessions for completions, with the
        longest lock: the Functions trigger renews no lock of a batch, docs/functions.md)."""
        lock_s = COMPLETION_LOCK_S if sessions else self.lock_duration_s
        with self.guard(f"creating Service Bus queue {physical!r}"):
            with suppress(MessagingEntityAlreadyExistsError):
                self.admin.create_queue(
                    physical, requires_session=sessions, requires_duplicate_detection=True,
                    duplicate_detection_history_time_window=dt.timedelta(minutes=10),
                    lock_duration=dt.timedelta(seconds=lock_s),
                    max_delivery_count=max(self.max_deliveries * 2, 10))
            self.plumbing.count("queue.setup")

    @contextmanager
    def guard(self, what: str) -> Iterator[None]:
        """Map Service Bus errors to dagq errors about ``what``."""
        try:
            with self._guard(what):
                try:
                    yield
                except (ServiceBusAuthenticationError, ServiceBusAuthorizationError) as exc:
                    raise StoreUnavailable(f"{what}: {self._guard.endpoint} refused access "
                                           f"({exc}). " + self._guard._credential_hint()) from None
                except (ServiceBusConnectionError, ServiceBusCommunicationError) as exc:
                    raise StoreUnavailable(
                        f"{what}: cannot reach {self._guard.endpoint} ({exc}). Check "
                        f"{self._guard.setting} and network access to the namespace") from None
        except DagqError:
            raise
        except ServiceBusError as exc:  # not an AzureError subclass in every version
            raise StoreError(f"{what}: Service Bus request failed ({exc})") from None

    def close(self) -> None:
        """Close every link and the client."""
        self.renewer.close()
        for q in self._queues.values():
            q.close()
        self.client.close()

"""Narrow interfaces between the engine's runtime and storage backends.

Every backend (SQLite, Azure) implements these; one contract test suite
(tests/contract/) runs unchanged against each. All methods are synchronous;
adapters may parallelise the ``*_many`` methods internally.

Errors: ``NotFound``, ``AlreadyExists``, ``PreconditionFailed``, ``StoreUnavailable``
from ``dagq.errors``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from dagq.core.engine import ParentLink, Reused
    from dagq.core.model import WorkflowDef


@dataclass
class RequestStats:
    """Counts backend requests by kind (``blob.read``, ``queue.send``, ...)."""

    counts: Counter[str] = field(default_factory=Counter)

    def add(self, kind: str, n: int = 1) -> None:
        """Record ``n`` requests of ``kind``."""
        self.counts[kind] += n

    @property
    def total(self) -> int:
        """All requests counted so far."""
        return sum(self.counts.values())

    def snapshot(self) -> dict[str, int]:
        """A copy of the counts."""
        return dict(self.counts)


class StateStore(Protocol):
    """Per-workflow state blobs with ETags (the source of truth).

    A state is the bytes of its last ``create`` or ``replace`` followed by those of every
    ``append`` since, in order; each write is one conditional operation."""

    max_journal: int
    """How many ``append`` calls may follow one ``create``/``replace`` (then replace)."""
    delta_tasks: int
    """A state of this many tasks is written by ``append`` whatever its snapshot's size
    (0: by size only): set where an append costs no more requests than a replace."""

    def read(self, workflow_id: str) -> tuple[bytes, str]:
        """The state bytes (snapshot and appends, as one consistent read) and their
        ETag; raises ``NotFound``."""
        ...

    def etag(self, workflow_id: str) -> str:
        """The current ETag without the bytes (one small request: is a cached copy still
        the stored state?); raises ``NotFound``."""
        ...

    def create(self, workflow_id: str, data: bytes) -> str:
        """Create the blob only if absent; returns the ETag; raises ``AlreadyExists``."""
        ...

    def replace(self, workflow_id: str, data: bytes, etag: str) -> str:
        """Overwrite (appends included) only if the current ETag is ``etag``; raises
        ``PreconditionFailed`` (or ``NotFound`` if the blob is gone). Returns the new ETag."""
        ...

    def append(self, workflow_id: str, data: bytes, etag: str) -> str:
        """Add ``data`` after the stored bytes only if the current ETag is ``etag``;
        raises like ``replace``. Returns the new ETag."""
        ...

    def list_ids(self, prefix: str = "") -> Iterator[str]:
        """Ids of all stored workflows starting with ``prefix``."""
        ...

    def delete(self, workflow_id: str) -> None:
        """Remove a workflow's state (no error when absent)."""
        ...


@dataclass
class IndexRow:
    """One workflow's listing row: small, queryable, updated on every state write."""

    id: str
    """Workflow id."""
    name: str
    """Workflow name from the definition."""
    status: str
    """Workflow status (see DESIGN statuses)."""
    counts: dict[str, int] = field(default_factory=dict)
    """Number of tasks per task status."""
    created_at: float = 0.0
    """Submission time (epoch seconds)."""
    updated_at: float = 0.0
    """Time of the last state write (epoch seconds)."""
    cancel_requested: bool = False
    """Set by a cancel request; never cleared by the coordinator's updates."""
    parent_id: str | None = None
    """Parent workflow id for sub-workflows."""
    parent_task: str | None = None
    """Task of the parent workflow this child runs for."""
    definition_hash: str = ""
    """Hash of the canonical definition (idempotent ``--id`` submits compare it)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Small JSON extras (schedule name, fire time, ...)."""


class Index(Protocol):
    """The workflow listing table and control plane (cancel flags)."""

    def create(self, row: IndexRow) -> None:
        """Insert a new row; raises ``AlreadyExists``."""
        ...

    def get(self, workflow_id: str) -> IndexRow:
        """The row; raises ``NotFound``."""
        ...

    def update_progress(
        self, workflow_id: str, *, status: str, counts: Mapping[str, int], updated_at: float
    ) -> None:
        """Update status, counts and time only (never touches ``cancel_requested``)."""
        ...

    def request_cancel(self, workflow_id: str, requested: bool = True) -> None:
        """Set ``cancel_requested`` (``requested=False`` clears it, as a retry does);
        raises ``NotFound``."""
        ...

    def query(
        self,
        *,
        status: str | None = None,
        name_prefix: str | None = None,
        cancel_requested: bool | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> list[IndexRow]:
        """Rows matching every given filter, ordered by id, starting after id ``after``."""
        ...

    def delete(self, workflow_id: str) -> None:
        """Remove a workflow's row (no error when absent)."""
        ...


@dataclass
class Message:
    """A received queue message."""

    id: str
    """Message id (the sender's id when one was given)."""
    body: bytes
    """Payload."""
    receipt: str
    """Opaque handle for delete/extend/release (changes on extend)."""
    delivery_count: int
    """1 on first delivery."""
    enqueued_at: float = 0.0
    """When it was sent (epoch seconds)."""


class Queue(Protocol):
    """One message queue with visibility timeouts (task queues, completion queue)."""

    name: str
    max_message_bytes: int
    """Largest body ``send`` accepts, in bytes as passed (before any transport encoding):
    senders check a message against it before recording that they will send it."""

    def send(
        self, body: bytes, *, delay_s: float = 0.0, message_id: str | None = None,
        session_id: str | None = None,
    ) -> None:
        """Enqueue ``body``, visible after ``delay_s``. A repeated ``message_id`` may be
        dropped as a duplicate by backends that support it."""
        ...

    def send_many(self, items: Iterable[tuple[bytes, float, str | None]]) -> None:
        """Send ``(body, delay_s, message_id)`` items (batched where the service allows)."""
        ...

    def receive(self, max_messages: int, visibility_timeout_s: float,
                wait_s: float = 0.0) -> list[Message]:
        """Up to ``max_messages`` visible messages, hidden for ``visibility_timeout_s``.
        Messages delivered more than the maximum delivery count are dead-lettered
        instead of returned."""
        ...

    def delete(self, message: Message) -> None:
        """Acknowledge (remove) a message. Deleting an already-deleted message is a no-op."""
        ...

    def delete_many(self, messages: Iterable[Message]) -> None:
        """Delete several messages."""
        ...

    def extend(self, message: Message, visibility_timeout_s: float) -> Message:
        """Keep ``message`` hidden for another ``visibility_timeout_s``; returns it with a
        fresh receipt. Raises ``NotFound`` if the message was lost (deleted, expired lock)."""
        ...

    def release(self, message: Message) -> None:
        """Make ``message`` visible again now, without counting against delivery limits."""
        ...

    def dead_letter(self, message: Message, reason: str) -> None:
        """Move ``message`` to the dead-letter store with ``reason``."""
        ...

    def approximate_count(self) -> int:
        """Messages waiting or being processed (visible or locked), approximately; never
        dead letters. Delayed messages count where the service cannot tell them apart
        (Storage queues, SQLite), not on Service Bus (its active count)."""
        ...

    def dead_letters(self, limit: int = 100) -> list[tuple[Message, str]]:
        """Dead-lettered messages with their reasons."""
        ...


class Queues(Protocol):
    """Opens queues by logical name (``completions`` or a task queue name)."""

    def get(self, name: str) -> Queue:
        """The queue called ``name`` (created on first use)."""
        ...

    def names(self) -> list[str]:
        """Logical names of existing task queues."""
        ...


class OutputStore(Protocol):
    """Bytes by name with MD5 (large outputs, stashed files, synced directories)."""

    def put(self, name: str, data: bytes) -> str:
        """Store ``data`` under ``name`` (overwrite); returns its hex MD5."""
        ...

    def get(self, name: str) -> bytes:
        """The stored bytes; raises ``NotFound``."""
        ...

    def list(self, prefix: str) -> list[tuple[str, int, str]]:
        """``(name, size, md5)`` of every object whose name starts with ``prefix``."""
        ...

    def delete(self, name: str) -> None:
        """Remove an object (no error when absent)."""
        ...


class Records(Protocol):
    """Small JSON records with ETags in named partitions (heartbeats, schedules, ...)."""

    def get(self, partition: str, key: str) -> tuple[dict[str, Any], str]:
        """The record and its ETag; raises ``NotFound``."""
        ...

    def put(self, partition: str, key: str, value: Mapping[str, Any],
            etag: str | None = None) -> str:
        """Upsert; with ``etag`` only if it matches (``PreconditionFailed``); ``etag="*new"``
        means create-only (``AlreadyExists``). Returns the new ETag."""
        ...

    def put_many(self, partition: str,
                 items: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Upsert several ``(key, record)`` pairs of one partition, each key at most once,
        in as few requests as the service allows (one per 100 on Azure Tables)."""
        ...

    def delete(self, partition: str, key: str) -> None:
        """Remove a record (no error when absent)."""
        ...

    def list(self, partition: str, prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
        """``(key, record)`` pairs of a partition, ordered by key."""
        ...


class Backend(Protocol):
    """Everything one store provides; built from settings by ``dagq.backends.open_backend``."""

    states: StateStore
    index: Index
    queues: Queues
    outputs: OutputStore
    records: Records
    stats: RequestStats

    def close(self) -> None:
        """Release connections."""
        ...


class ChildWorkflows(Protocol):
    """What the runtime needs to start, retry and cancel child workflows.

    The coordinator's dispatcher uses this narrow port instead of the user-facing client
    (``dagq.client.WorkflowClient`` implements it).
    """

    def submit(self, defn: WorkflowDef, *, workflow_id: str, parent: ParentLink | None,
               start_delay_s: float = 0.0,
               reuse: Mapping[str, Reused] | None = None) -> object:
        """Store child workflow ``defn`` as ``workflow_id`` (idempotent) and start it
        (``parent`` None: a run of its own, e.g. an exit handler; ``reuse``: tasks
        completed with given results, as ``engine.seed``)."""
        ...

    def retry(self, workflow_id: str, *, parent: ParentLink | None = None,
              request_id: str | None = None) -> str:
        """Retry what failed in ``workflow_id``, re-attached to ``parent``."""
        ...

    def cancel(self, workflow_id: str, *, settle: bool = True) -> object:
        """Cancel ``workflow_id`` and its descendants (``settle``: also cancel at once the
        attempts no live worker runs)."""
        ...

    def descendants(self, workflow_id: str) -> list[IndexRow]:
        """Index rows of every child workflow below ``workflow_id``."""
        ...

"""A worker's queue with its priority bands: ``gpu~high``, ``gpu`` and ``gpu~low`` drained
as one queue, highest band first (``dagq.core.priority``, docs/concurrency.md).

``BandedQueue`` is what a worker receives from, deletes from and extends leases on. A
message taken from a band queue carries its band in its receipt, so that acknowledging
or releasing it goes to the queue it came from; a message of the queue itself is left as
it is. Band queues are looked for when the worker starts and every ``REFRESH_S`` seconds
(one listing request): a store that never uses priorities costs nothing more than the
plain queue, one receive per poll.

Order of a receive: the bands in ``drain_order`` (highest first, except every
``LOW_FIRST_EVERY``-th take that starts lower: the starvation rule), each asked without
waiting, the last one asked with the poll's wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from dagq.core.priority import BANDS, band_queue, drain_order
from dagq.ports import Message, Queue, Queues

REFRESH_S = 30.0
"""How often a worker looks for band queues created since it started."""
_MARK = "\x1f"


class BandedQueue:
    """The queue ``name`` and its band queues, received from in priority order."""

    def __init__(self, queues: Queues, name: str,
                 prefixes: tuple[str, ...] = ()) -> None:
        self.queues = queues
        self.name = name
        self.normal: Queue = self._narrow(queues.get(name), prefixes)
        self.max_message_bytes = self.normal.max_message_bytes
        self.bands: dict[str, Queue] = {"normal": self.normal}
        self._prefixes = prefixes
        self._takes = 0
        self._looked = float("-inf")
        self._lock = threading.Lock()
        self._refresh()

    @staticmethod
    def _narrow(queue: Queue, prefixes: tuple[str, ...]) -> Queue:
        if not prefixes:
            return queue
        only: Callable[[Iterable[str]], Queue] = getattr(queue, "only")  # noqa: B009
        return only(prefixes)  # (not in the Queue protocol: the embedded store's filter)

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._looked < REFRESH_S:
            return
        self._looked = now
        try:
            existing = set(self.queues.names())
        except Exception:  # an outage: keep the bands known so far, look again later
            return
        with self._lock:
            for band in BANDS:
                logical = band_queue(self.name, band)
                if band not in self.bands and logical in existing:
                    self.bands[band] = self._narrow(self.queues.get(logical), self._prefixes)

    @property
    def only(self) -> Callable[[Iterable[str]], BandedQueue] | None:
        """Like the embedded queue's ``only``: every band narrowed to message ids with
        one of ``prefixes`` (None when the queue cannot filter)."""
        if getattr(self.normal, "only", None) is None:
            return None
        return lambda prefixes: BandedQueue(self.queues, self.name, tuple(prefixes))

    # -- receiving ---------------------------------------------------------------------
    def receive(self, max_messages: int, visibility_timeout_s: float,
                wait_s: float = 0.0) -> list[Message]:
        """Messages of the highest band that has some (see the module docstring)."""
        self._refresh()
        bands = self.bands
        if len(bands) == 1:
            return self.normal.receive(max_messages, visibility_timeout_s, wait_s)
        order = [b for b in drain_order(self._takes) if b in bands]
        for n, band in enumerate(order):
            last = n == len(order) - 1
            msgs = bands[band].receive(max_messages, visibility_timeout_s,
                                       wait_s if last else 0.0)
            if msgs:
                self._takes += 1
                return msgs if band == "normal" else [_mark(m, band) for m in msgs]
        return []

    # -- settling (routed to the message's band) ---------------------------------------
    def _of(self, message: Message) -> tuple[Queue, Message]:
        band, sep, receipt = message.receipt.partition(_MARK)
        if not sep or band not in self.bands:
            return self.normal, message
        return self.bands[band], Message(message.id, message.body, receipt,
                                         message.delivery_count, message.enqueued_at)

    def delete(self, message: Message) -> None:
        """Acknowledge ``message`` on its band's queue."""
        queue, plain = self._of(message)
        queue.delete(plain)

    def delete_many(self, messages: Iterable[Message]) -> None:
        """Acknowledge several messages."""
        for m in messages:
            self.delete(m)

    def extend(self, message: Message, visibility_timeout_s: float) -> Message:
        """Keep ``message`` hidden longer (its band's queue)."""
        queue, plain = self._of(message)
        fresh = queue.extend(plain, visibility_timeout_s)
        return fresh if queue is self.normal else _mark(fresh, message.receipt.split(_MARK)[0])

    def release(self, message: Message) -> None:
        """Make ``message`` visible again now."""
        queue, plain = self._of(message)
        queue.release(plain)

    def dead_letter(self, message: Message, reason: str) -> None:
        """Dead-letter ``message`` from its band's queue."""
        queue, plain = self._of(message)
        queue.dead_letter(plain, reason)

    # -- the rest of the queue protocol: the queue itself ------------------------------
    def send(self, body: bytes, *, delay_s: float = 0.0, message_id: str | None = None,
             session_id: str | None = None) -> None:
        """Send to the normal band."""
        self.normal.send(body, delay_s=delay_s, message_id=message_id, session_id=session_id)

    def send_many(self, items: Iterable[tuple[bytes, float, str | None]]) -> None:
        """Send to the normal band."""
        self.normal.send_many(items)

    def approximate_count(self) -> int:
        """Messages of every band."""
        return sum(q.approximate_count() for q in list(self.bands.values()))

    def dead_letters(self, limit: int = 100) -> list[tuple[Message, str]]:
        """Dead letters of the queue (shared by its bands where the backend shares one)."""
        return self.normal.dead_letters(limit)


def _mark(message: Message, band: str) -> Message:
    return Message(message.id, message.body, f"{band}{_MARK}{message.receipt}",
                   message.delivery_count, message.enqueued_at)

"""``Queues`` on SQLite: one ``messages`` table shared by every queue.

A message is visible when ``visible_at <= now``. Receiving hides it until
``now + visibility_timeout`` and stamps a fresh random ``lock``; the receipt is
``"{seq}:{lock}"``, so a receipt from an earlier delivery matches nothing. Deleting a
message with a sender id leaves a tombstone (by trigger) that drops re-sends of the same
id for ``dedup_window_s``. A receive that would deliver a message more than
``max_deliveries`` times moves it to ``dead_letters`` instead.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from dagq.backends.sqlite.bell import Bell, bells_dir
from dagq.backends.sqlite.db import SqliteDb
from dagq.errors import NotFound, StoreError
from dagq.ports import Message, RequestStats
from dagq.protocol.names import COMPLETIONS, EVENTS, NOTIFICATIONS

"""Logical name of the completion queue (not a task queue)."""

_SEND = (
    "INSERT INTO messages (queue, msg_id, body, visible_at, enqueued_at) "
    "SELECT ?1, ?2, ?3, ?4, ?5 WHERE ?2 IS NULL OR NOT EXISTS ("
    "SELECT 1 FROM tombstones WHERE queue = ?1 AND msg_id = ?2 AND deleted_at > ?6) "
    "ON CONFLICT (queue, msg_id) DO NOTHING"
)
_NEXT_VISIBLE = "SELECT min(visible_at) FROM messages WHERE queue = ?1"
_RECEIVE = (
    "UPDATE messages SET visible_at = ?1, delivery_count = delivery_count + 1, "
    "lock = random() WHERE seq IN (SELECT seq FROM messages WHERE queue = ?2 "
    "AND visible_at <= ?3 ORDER BY visible_at, seq LIMIT ?4) "
    "RETURNING seq, msg_id, body, delivery_count, enqueued_at, lock"
)
_DEAD_LETTER = (
    "INSERT INTO dead_letters (queue, msg_id, body, enqueued_at, delivery_count, reason, "
    "dead_at) SELECT queue, msg_id, body, enqueued_at, delivery_count - ?2, ?3, ?4 "
    "FROM messages WHERE seq = ?1"
)
_DEAD_LETTER_HELD = _DEAD_LETTER.replace("WHERE seq = ?1", "WHERE seq = ?1 AND lock = ?5")
_DELETE = "DELETE FROM messages WHERE seq = ? AND lock = ?"
_PURGE_EVERY_S = 60.0
_SLOW_POLL_AFTER_S = 1.0


def _match(prefixes: tuple[str, ...], first: int) -> str:
    """SQL true for a message whose id starts with one of ``prefixes``, bound from
    parameter ``?{first}`` on (a prefix is compared, never matched as a pattern)."""
    return " OR ".join(f"substr(msg_id, 1, {len(p)}) = ?{first + k}"
                       for k, p in enumerate(prefixes))


def _parse_receipt(receipt: str) -> tuple[int, int]:
    """``(seq, lock)`` of a receipt; ``(-1, 0)`` (matches nothing) if malformed."""
    seq, _, lock = receipt.partition(":")
    try:
        return int(seq), int(lock)
    except ValueError:
        return -1, 0


def _message(row: tuple[Any, ...]) -> Message:
    seq, msg_id, body, count, enqueued_at, lock = row
    return Message(
        id=msg_id if msg_id is not None else f"#{seq}", body=bytes(body),
        receipt=f"{seq}:{lock}" if lock is not None else "", delivery_count=count,
        enqueued_at=enqueued_at,
    )


MAX_BODY = 16 * 1024 * 1024
"""Largest body: SQLite itself stores up to 1 GB per value, but every message is read
whole by a receiver; 16 MiB keeps one message far from memory trouble while taking any
task message that the Azure queues would take."""


class SqliteQueue:
    """One logical queue (rows of ``messages`` with ``queue = name``)."""

    def __init__(self, name: str, db: SqliteDb, stats: RequestStats, *, max_deliveries: int,
                 dedup_window_s: float, poll_interval_s: float, bell: Bell | None = None) -> None:
        self.name = name
        self.bell = bell if bell is not None else Bell(None, name)
        self.max_message_bytes = MAX_BODY
        self._db = db
        self._stats = stats
        self._max = max_deliveries
        self._window = dedup_window_s
        self._poll = poll_interval_s
        self._next_purge = 0.0
        self._next_visible, self._receive = _NEXT_VISIBLE, _RECEIVE
        self._only: tuple[str, ...] = ()

    def only(self, prefixes: Iterable[str]) -> SqliteQueue:
        """This queue as a receiver of only the messages whose id starts with one of
        ``prefixes`` (``dagq run``'s workers take only the tasks of their own workflows:
        ``{id}/`` and ``{id}~``). The filter is part of the receive query, so others'
        messages are never delivered, released or counted as a delivery, and a wait for
        messages sleeps on them like on an empty queue. Sending, deleting and the rest
        are those of the whole queue."""
        out = SqliteQueue(self.name, self._db, self._stats, max_deliveries=self._max,
                          dedup_window_s=self._window, poll_interval_s=self._poll,
                          bell=self.bell)
        out._only = tuple(prefixes)
        if not out._only:
            raise ValueError("only() needs at least one message id prefix")
        out._next_visible = f"{_NEXT_VISIBLE} AND ({_match(out._only, 2)})"
        out._receive = _RECEIVE.replace(
            "AND visible_at <= ?3", f"AND visible_at <= ?3 AND ({_match(out._only, 5)})")
        return out

    def send(self, body: bytes, *, delay_s: float = 0.0, message_id: str | None = None,
             session_id: str | None = None) -> None:
        """Enqueue ``body`` visible after ``delay_s``; a live or recently deleted
        ``message_id`` makes this a no-op. ``session_id`` is accepted and ignored."""
        self._stats.add("queue.send")
        self._fits(body)
        now = time.time()
        self._db.execute(
            _SEND, (self.name, message_id, body, now + delay_s, now, now - self._window)
        )
        if delay_s <= 0:
            self.bell.ring()

    def send_many(self, items: Iterable[tuple[bytes, float, str | None]]) -> None:
        """Send ``(body, delay_s, message_id)`` items in one transaction."""
        self._stats.add("queue.send_many")
        now = time.time()
        rows = [(self.name, mid, self._fits(body), now + delay, now, now - self._window)
                for body, delay, mid in items]
        if rows:
            with self._db.write() as conn:
                conn.executemany(_SEND, rows)
            if any(r[3] <= now for r in rows):
                self.bell.ring()

    def _fits(self, body: bytes) -> bytes:
        if len(body) > MAX_BODY:
            raise StoreError(f"a message of {len(body)} bytes does not fit queue "
                             f"{self.name!r}: the embedded store takes at most {MAX_BODY}")
        return body

    def receive(self, max_messages: int, visibility_timeout_s: float,
                wait_s: float = 0.0) -> list[Message]:
        """Up to ``max_messages`` visible messages, hidden for ``visibility_timeout_s``.

        With ``wait_s`` > 0, waits for messages: it re-queries only when another
        connection committed (``PRAGMA data_version``) or a hidden message is due, and it
        wakes early when a sender rings the queue's bell (``dagq.backends.sqlite.bell``).
        A receive that took all it asked for rings the bell on, so that a second waiter
        whose wake-up it may have swallowed looks too.
        """
        self._stats.add("queue.receive")
        if wait_s <= 0:
            return self._try_receive(max_messages, visibility_timeout_s)[0]
        self.bell.open()  # before the first look: a ring after it is kept for the wait
        conn = self._db.conn()
        version = conn.execute("PRAGMA data_version").fetchone()[0]  # before the query
        messages, due = self._try_receive(max_messages, visibility_timeout_s)
        if messages:
            return self._passed_on(messages, max_messages)
        start = time.monotonic()
        deadline = start + wait_s
        while True:
            now = time.monotonic()
            if now >= deadline:
                return []
            pause = self._poll if now - start < _SLOW_POLL_AFTER_S else 5 * self._poll
            self.bell.wait(min(pause, deadline - now))
            seen = conn.execute("PRAGMA data_version").fetchone()[0]
            if seen == version and (due is None or time.time() < due):
                continue
            version = seen
            messages, due = self._try_receive(max_messages, visibility_timeout_s)
            if messages:
                return self._passed_on(messages, max_messages)

    def _passed_on(self, messages: list[Message], max_messages: int) -> list[Message]:
        if len(messages) >= max_messages:  # there may be more: wake the next waiter
            self.bell.ring()
        return messages

    def _try_receive(
        self, max_messages: int, visibility_timeout_s: float
    ) -> tuple[list[Message], float | None]:
        """Messages received now, or none and when the next hidden one becomes visible.

        A read-only check comes first, so idle polls take no write lock; the receive is
        then one statement, so its own transaction: the write lock is held for it alone,
        not across the round trips of a BEGIN ... COMMIT. A message received once too
        often is moved to the dead letters afterwards, under the lock it was received
        with (a crash in between leaves it hidden until its visibility timeout, and the
        next receive moves it)."""
        now = time.time()
        due = self._db.execute(self._next_visible, (self.name, *self._only)).fetchone()[0]
        if due is None or due > now:  # read-only check: idle polls take no write lock
            return [], due
        rows = self._db.execute(
            self._receive, (now + visibility_timeout_s, self.name, now, max_messages, *self._only),
        ).fetchall()
        dead = [r for r in rows if r[3] > self._max]  # r: seq, id, body, count, ..., lock
        if dead:
            reason = f"delivered {self._max} times without being deleted (max deliveries)"
            with self._db.write() as c:
                for r in dead:
                    if c.execute(_DEAD_LETTER_HELD, (r[0], 1, reason, now, r[5])).rowcount:
                        c.execute("DELETE FROM messages WHERE seq = ?", (r[0],))
            rows = [r for r in rows if r[3] <= self._max]
        rows.sort()  # RETURNING order is unspecified; hand them out oldest first
        return [_message(r) for r in rows], None

    def delete(self, message: Message) -> None:
        """Remove the message if ``message.receipt`` is current (else a no-op)."""
        self._stats.add("queue.delete")
        self._db.execute(_DELETE, _parse_receipt(message.receipt))
        self._maybe_purge()

    def delete_many(self, messages: Iterable[Message]) -> None:
        """Delete several messages in one transaction."""
        self._stats.add("queue.delete_many")
        keys = [_parse_receipt(m.receipt) for m in messages]
        if keys:
            with self._db.write() as conn:
                conn.executemany(_DELETE, keys)
        self._maybe_purge()

    def _maybe_purge(self) -> None:
        """Drop tombstones older than the dedup window (at most once a minute)."""
        now = time.time()
        if now >= self._next_purge:
            self._next_purge = now + _PURGE_EVERY_S
            self._db.execute(
                "DELETE FROM tombstones WHERE deleted_at < ?", (now - self._window,)
            )

    def extend(self, message: Message, visibility_timeout_s: float) -> Message:
        """Hide ``message`` for another ``visibility_timeout_s``; returns it with a new
        receipt. Raises ``NotFound`` if the receipt is no longer current."""
        self._stats.add("queue.extend")
        seq, lock = _parse_receipt(message.receipt)
        rows = self._db.execute(
            "UPDATE messages SET visible_at = ?, lock = random() WHERE seq = ? AND lock = ? "
            "RETURNING lock",
            (time.time() + visibility_timeout_s, seq, lock),
        ).fetchall()
        if not rows:
            raise NotFound(
                f"message {message.id!r} of queue {self.name!r} was deleted or delivered "
                "again after its visibility timeout; its receipt is no longer valid"
            )
        return Message(id=message.id, body=message.body, receipt=f"{seq}:{rows[0][0]}",
                       delivery_count=message.delivery_count, enqueued_at=message.enqueued_at)

    def release(self, message: Message) -> None:
        """Make the message visible now without counting this delivery; a no-op if the
        receipt is no longer current."""
        self._stats.add("queue.release")
        seq, lock = _parse_receipt(message.receipt)
        self._db.execute(
            "UPDATE messages SET visible_at = ?, lock = random(), "
            "delivery_count = max(delivery_count - 1, 0) WHERE seq = ? AND lock = ?",
            (time.time(), seq, lock),
        )
        self.bell.ring()

    def dead_letter(self, message: Message, reason: str) -> None:
        """Move the message to the dead letters with ``reason``; a no-op if the receipt
        is no longer current."""
        self._stats.add("queue.dead_letter")
        seq, lock = _parse_receipt(message.receipt)
        with self._db.write() as conn:
            cur = conn.execute(
                _DEAD_LETTER_HELD,
                (seq, 0, reason, time.time(), lock),
            )
            if cur.rowcount:
                conn.execute("DELETE FROM messages WHERE seq = ?", (seq,))

    def approximate_count(self) -> int:
        """Messages in the queue, visible or not (exact here)."""
        self._stats.add("queue.count")
        row = self._db.execute(
            "SELECT count(*) FROM messages WHERE queue = ?", (self.name,)
        ).fetchone()
        return int(row[0])

    def dead_letters(self, limit: int = 100) -> list[tuple[Message, str]]:
        """Dead-lettered messages of this queue, oldest first, with their reasons."""
        self._stats.add("queue.dead_letters")
        rows = self._db.execute(
            "SELECT seq, msg_id, body, delivery_count, enqueued_at, reason FROM dead_letters "
            "WHERE queue = ? ORDER BY seq LIMIT ?",
            (self.name, limit),
        ).fetchall()
        return [(_message((*r[:5], None)), r[5]) for r in rows]

    def __repr__(self) -> str:
        return f"SqliteQueue({self.name!r})"


class SqliteQueues:
    """Opens queues by name; ``names()`` lists the task queues (all but completions)."""

    def __init__(self, db: SqliteDb, stats: RequestStats, *, max_deliveries: int,
                 dedup_window_s: float, poll_interval_s: float) -> None:
        if max_deliveries < 1:
            raise ValueError(f"max_deliveries must be at least 1, got {max_deliveries}")
        self._db = db
        self._stats = stats
        self._max = max_deliveries
        self._window = dedup_window_s
        self._poll = poll_interval_s
        self._open: dict[str, SqliteQueue] = {}
        self._bells = None if str(db.path) == ":memory:" else bells_dir(db.path)

    def get(self, name: str) -> SqliteQueue:
        """The queue called ``name`` (registered in table ``queues`` on first use)."""
        queue = self._open.get(name)
        if queue is None:
            if not name:
                raise ValueError("a queue name must not be empty")
            self._db.execute(
                "INSERT OR IGNORE INTO queues (name, created_at) VALUES (?, ?)",
                (name, time.time()),
            )
            queue = SqliteQueue(name, self._db, self._stats, max_deliveries=self._max,
                                dedup_window_s=self._window, poll_interval_s=self._poll,
                                bell=Bell(self._bells, name))
            self._open[name] = queue
        return queue

    def close(self) -> None:
        """Close this process's ends of the queues' bells."""
        for queue in self._open.values():
            queue.bell.close()

    def names(self) -> list[str]:
        """Names of the task queues used so far, sorted."""
        self._stats.add("queues.names")
        rows = self._db.execute(
            "SELECT name FROM queues WHERE name NOT IN (?, ?, ?) ORDER BY name",
            (COMPLETIONS, NOTIFICATIONS, EVENTS)
        ).fetchall()
        return [r[0] for r in rows]

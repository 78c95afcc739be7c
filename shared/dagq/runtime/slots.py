"""Concurrency keys at run time: the slots of each key live in the store's records.

One record per key (``dagq.protocol.slots``) holds the attempts that have a slot and
those waiting for one, changed only under its ETag (compare-and-swap), so any number of
coordinators share it without a lock service (docs/concurrency.md).

- Before the task message of an attempt with a key is sent
  (``dagq.runtime.dispatch.OutboxSender.send``), ``acquire`` adds its dispatch key to the
  holders (one read and one write; nothing when it already holds a slot, so a re-send
  after a crash takes no second slot). A full key leaves the message unsent: its outbox
  entry stays in the state, the attempt is listed as waiting, and the entry is tried
  again when a slot frees (``release`` names the waiters to wake) or when the entry is
  re-sent like any outbox entry older than ``DAGQ_OUTBOX_GRACE``.
- When an attempt ends (a completion applied, a cancel, a timeout, a retry's new
  attempt), ``release`` removes it (``Committer.commit`` compares the keyed attempts
  running before and after each write: ``running_keys``).
- The sweep (``sweep_holders``) drops holders and waiters whose attempt no longer runs
  in its workflow's stored state: what a coordinator killed between a write and a
  release, or between an acquire and a send, leaves behind.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from dagq.core import engine
from dagq.core.engine.state import WorkflowState
from dagq.crashpoints import crash_point
from dagq.errors import AlreadyExists, NotFound, PreconditionFailed
from dagq.ports import Records
from dagq.protocol.slots import (
    PARTITION,
    key_of,
    keyed,
    parse_holder,
    read,
    record_key,
    running_keys,
)

__all__ = ["PARTITION", "Slots", "by_workflow", "key_of", "keyed", "running_keys"]

log = logging.getLogger("dagq.coordinator")

MAX_WAITING = 16
"""Waiters listed in a key's record (to wake at a release); later ones are found by the
periodic re-send of their outbox entries."""
_TRIES = 20


class Slots:
    """Acquires and releases the slots of concurrency keys (one per coordinator)."""

    def __init__(self, records: Records, clock: Callable[[], float] = time.time) -> None:
        self.records = records
        self.clock = clock

    def read(self, key: str) -> tuple[dict[str, Any], str]:
        """The record of ``key`` and its ETag (``"*new"`` when there is none)."""
        return read(self.records, key)

    def _update(self, key: str, change: Callable[[dict[str, Any]], Any]) -> Any:
        """Apply ``change`` to the record under its ETag until it sticks; ``change``
        returns ``(result, write)``."""
        for _ in range(_TRIES):
            value, etag = self.read(key)
            result, write = change(value)
            if not write:
                return result
            try:
                self.records.put(PARTITION, record_key(key), value, etag=etag)
            except (PreconditionFailed, AlreadyExists, NotFound):
                continue  # another coordinator changed it: decide again on the new record
            return result
        raise PreconditionFailed(f"the slots of concurrency key {key!r} kept changing")

    def acquire(self, key: str, limit: int, holder: str) -> bool:
        """Take a slot of ``key`` for ``holder`` (a dispatch key); False when the key
        is full (``holder`` is then listed as waiting)."""
        now = self.clock()

        def change(value: dict[str, Any]) -> tuple[bool, bool]:
            holders, waiting = value["holders"], value["waiting"]
            value["limit"] = limit
            if holder in holders:
                return True, False
            if len(holders) >= limit:
                if holder in waiting or len(waiting) >= MAX_WAITING:
                    return False, False
                waiting[holder] = now
                return False, True
            holders[holder] = now
            waiting.pop(holder, None)
            return True, True

        try:
            granted = bool(self._update(key, change))
        except PreconditionFailed:  # very busy key: wait like a full one, try again later
            return False
        if granted:
            crash_point("after_slot_acquire")
        return granted

    def release(self, key: str, holders: Iterable[str]) -> list[str]:
        """Give back the slots (and waiting places) of ``holders``; the waiters to wake,
        oldest first, as many as slots are free."""
        gone = set(holders)

        def change(value: dict[str, Any]) -> tuple[list[str], bool]:
            held, waiting = value["holders"], value["waiting"]
            hit = [h for h in gone if h in held or h in waiting]
            for h in hit:
                held.pop(h, None)
                waiting.pop(h, None)
            free = int(value.get("limit", 1)) - len(held)
            wake = sorted(waiting, key=lambda h: waiting[h])[:max(free, 0)]
            return wake, bool(hit)

        result: list[str] = self._update(key, change)
        return result

    def sweep_holders(self, load: Callable[[str], WorkflowState | None]) -> list[str]:
        """Drop the holders and waiters whose attempt no longer runs in its workflow's
        stored state (``load`` reads it fresh); the waiters to wake."""
        wake: list[str] = []
        states: dict[str, WorkflowState | None] = {}

        def alive(holder: str) -> bool:
            parsed = parse_holder(holder)
            if parsed is None:
                return False
            workflow, task, attempt = parsed
            if workflow not in states:
                states[workflow] = load(workflow)
            state = states[workflow]
            return state is not None and engine.judge_attempt(
                state, task, attempt, holder) in ("run", "cancelled")

        for _, value in self.records.list(PARTITION):
            key = str(value.get("key", ""))
            listed = [*value.get("holders", {}), *value.get("waiting", {})]
            dead = [h for h in listed if not alive(h)]
            if dead:
                log.info("concurrency key %r: dropping %d holder(s) or waiter(s) whose "
                         "attempt no longer runs: %s", key, len(dead), ", ".join(dead[:5]))
                wake += self.release(key, dead)
            elif len(value.get("holders", {})) < int(value.get("limit", 1)):
                wake += sorted(value.get("waiting", {}))
        return wake


def by_workflow(holders: Iterable[str]) -> dict[str, frozenset[str]]:
    """Dispatch keys grouped by their workflow."""
    out: dict[str, set[str]] = {}
    for holder in holders:
        out.setdefault(holder.partition("/")[0], set()).add(holder)
    return {wf: frozenset(keys) for wf, keys in out.items()}

"""The coordinator: applies completions to workflow states and dispatches what became ready.

One loop: receive a batch from the completion queue, group it by workflow, apply each
group with the core, write each state once under its ETag, send the outbox entries the
write recorded, update the index row, then acknowledge. Sweeps repair what crashes leave
behind. docs/coordinator.md walks through every crash point.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from dagq.config import Settings
from dagq.core import engine
from dagq.core.engine import WorkflowState, dumps, loads
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES, OutputRef
from dagq.crashpoints import crash_point
from dagq.errors import NotFound, PreconditionFailed, StoreUnavailable
from dagq.ports import Backend, ChildWorkflows, Message
from dagq.protocol.messages import (
    CompletionMessage,
    CompletionQueueMessage,
    ControlMessage,
    decode_and_group,
)
from dagq.protocol.names import COMPLETIONS
from dagq.protocol.outputs import fetch_verified
from dagq.runtime.dispatch import OutboxSender

log = logging.getLogger("dagq.coordinator")

Mutation = Callable[[WorkflowState], list[engine.Effects]]

MAX_CONFLICT_RETRIES = 8
CACHE_SIZE = 256


@dataclass
class _Cached:
    state: WorkflowState
    etag: str


@dataclass
class CoordinatorStats:
    """What one coordinator did (printed in its summary line)."""

    counts: Counter[str] = field(default_factory=Counter)

    def line(self) -> str:
        """A one-line summary."""
        keys = ("completions", "controls", "writes", "conflicts", "dispatched",
                "duplicates", "resent", "dead_lettered")
        return ", ".join(f"{k}={self.counts[k]}" for k in keys)


@dataclass
class Applied:
    """What ``Coordinator.apply_messages`` did with messages a trigger handed over."""

    rejected: list[tuple[str, str]] = field(default_factory=list)
    """``(message id, reason)`` of malformed messages: never retry them."""
    unapplied: list[str] = field(default_factory=list)
    """Workflows whose write kept conflicting: redeliver their messages."""


class Coordinator:
    """Advances workflows stored in ``backend``; safe to run several (ETag CAS)."""

    def __init__(
        self, backend: Backend, settings: Settings, *, children: ChildWorkflows,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``children`` submits, retries and cancels child workflows (a ``WorkflowClient``
        on the same backend)."""
        self.backend = backend
        self.settings = settings
        self.clock = clock
        self.children = children
        self.completions = backend.queues.get(COMPLETIONS)
        self.sender = OutboxSender(backend, children)
        self.stats = CoordinatorStats()
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        self._sent: dict[str, set[str]] = {}
        self._unflushed: dict[str, float] = {}
        self._index_seen: dict[str, tuple[tuple[str, tuple[tuple[str, int], ...]], float]] = {}
        self._index_dirty: dict[str, WorkflowState] = {}
        self._lock = threading.RLock()
        self._last_sweep = 0.0
        self._batch_wait = 0.0 if settings.is_embedded else settings.batch_wait
        self._pending_wait = False

    # -- main loop ---------------------------------------------------------------------
    def run(self, stop: threading.Event | None = None,
            until: Callable[[], bool] | None = None) -> None:
        """Loop until ``stop`` is set or ``until()`` is true; sweeps run on their interval."""
        stop = stop or threading.Event()
        while not stop.is_set() and not (until and until()):
            try:
                n = self.step(wait_s=self.settings.idle_poll)
                now = self.clock()
                if n == 0:
                    self.flush(now)
                if now - self._last_sweep >= self.settings.sweep_interval:
                    self.sweep(now)
            except StoreUnavailable as exc:  # an outage is waited out, never fatal
                log.warning("store unavailable (retrying in 1 s): %s", exc)
                stop.wait(1.0)
        self.flush(float("inf"))  # a clean stop leaves no sent entry behind to be re-sent

    def step(self, wait_s: float = 0.0) -> int:
        """Receive and apply one batch; returns the number of messages handled."""
        if self._pending_wait:  # let a remote queue fill the next batch: fewer requests
            self._pending_wait = False
            time.sleep(self._batch_wait)
        msgs = self.completions.receive(
            self.settings.batch_size, self.settings.visibility_timeout, wait_s=wait_s)
        if not msgs:
            return 0
        if self._batch_wait and len(msgs) < self.settings.batch_size:
            self._pending_wait = True
        crash_point("after_receive")
        grouped = decode_and_group((msg, msg.body) for msg in msgs)
        for msg, reason in grouped.rejected:
            log.warning("dead-lettering malformed completion %s: %s", msg.id, reason)
            self.completions.dead_letter(msg, reason)
            self.stats.counts["dead_lettered"] += 1
        for wf, items in grouped.groups.items():
            self._handle_group(wf, items)
        return len(msgs)

    def _handle_group(self, workflow_id: str,
                      items: list[tuple[Message, CompletionQueueMessage]]) -> None:
        decoded = [d for _, d in items]
        ok = self.commit(workflow_id, lambda state: self._apply(state, decoded))
        if ok is None:
            return  # not acknowledged: redelivery retries
        self.completions.delete_many(m for m, _ in items)
        crash_point("after_ack")

    def apply_messages(self, bodies: Iterable[tuple[str, bytes | str]]) -> Applied:
        """Apply completion-queue messages that a trigger already received.

        ``bodies`` are ``(message id, body)`` pairs. Nothing is acknowledged here (the
        trigger settles the messages); the result names the malformed ones and the
        workflows whose write must be retried by redelivery.
        """
        grouped = decode_and_group(bodies)
        result = Applied(rejected=list(grouped.rejected))
        self.stats.counts["dead_lettered"] += len(grouped.rejected)
        for workflow_id, pairs in grouped.groups.items():
            items = [decoded for _, decoded in pairs]
            if self.commit(workflow_id, self._applier(items)) is None:
                result.unapplied.append(workflow_id)
        return result

    def _applier(self, items: list[CompletionQueueMessage]) -> Mutation:
        return lambda state: self._apply(state, items)

    def _apply(self, state: WorkflowState,
               items: Iterable[CompletionQueueMessage]) -> list[engine.Effects]:
        now = self.clock()
        effects: list[engine.Effects] = []
        batch: list[engine.Completion] = []
        for item in items:
            if isinstance(item, CompletionMessage):
                self.stats.counts["completions"] += 1
                batch.append(engine.Completion(
                    task=item.task, attempt=item.attempt, success=item.success,
                    output=item.output, output_ref=item.output_ref, error=item.error,
                    released=item.released))
                continue
            if batch:
                effects.append(engine.apply(state, batch, now, resolve=self._resolve))
                batch = []
            self.stats.counts["controls"] += 1
            effects.append(self._control(state, item, now))
        if batch:
            effects.append(engine.apply(state, batch, now, resolve=self._resolve))
        return effects

    def _resolve(self, ref: OutputRef) -> Any:
        return json.loads(fetch_verified(self.backend, ref))

    @staticmethod
    def _control(state: WorkflowState, item: ControlMessage, now: float) -> engine.Effects:
        if item.action == "start":
            return engine.start(state, now)
        if item.action == "cancel":
            return engine.cancel(state, now)
        if item.parent_attempt is not None and state.parent is not None \
                and item.request_id not in state.retry_ids:
            state.parent = replace(state.parent, attempt=item.parent_attempt)
        return engine.retry(state, now, item.request_id)

    # -- the write protocol --------------------------------------------------------------
    def commit(self, workflow_id: str, mutate: Mutation) -> list[engine.Effects] | None:
        """Apply ``mutate`` under ETag CAS, send the new outbox entries, update the index.

        Returns the effects, or ``None`` when the workflow does not exist or the write
        kept conflicting (the caller must not acknowledge; redelivery retries).
        """
        for _ in range(MAX_CONFLICT_RETRIES):
            with self._lock:
                from_cache = workflow_id in self._cache
            cached = self._load(workflow_id)
            if cached is None:
                log.warning("workflow %s does not exist; dropping its messages", workflow_id)
                return []
            state = cached.state
            now = self.clock()
            before = set(state.outbox)
            effects = mutate(state)
            crash_point("after_apply")
            mine = self._sent.get(workflow_id, set()) & set(state.outbox)
            engine.clear_outbox(state, mine)
            due = [e for e in engine.outbox_due(state, now, self.settings.outbox_grace)
                   if e.key in before]
            if not mine and not due and set(state.outbox) == before and _noop(effects):
                if from_cache:
                    # another coordinator may have written since: "nothing to do" (and so
                    # acknowledging the messages) must be decided on the stored state
                    self._evict(workflow_id)
                    continue
                self._update_index(state, now)
                for eff in effects:  # a batch of only duplicates changes nothing
                    self.stats.counts["duplicates"] += len(eff.ignored)
                return effects
            try:
                etag = self.backend.states.replace(workflow_id, dumps(state), cached.etag)
            except PreconditionFailed:
                self.stats.counts["conflicts"] += 1
                self._evict(workflow_id)
                continue
            except NotFound:
                self._evict(workflow_id)
                return []
            self.stats.counts["writes"] += 1
            with self._lock:
                self._cache[workflow_id] = _Cached(state, etag)
                self._cache.move_to_end(workflow_id)
                while len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)
                self._sent[workflow_id] = self._sent.get(workflow_id, set()) - mine
            crash_point("after_write")
            self._send(state, [e for k, e in state.outbox.items() if k not in before], due)
            crash_point("after_send")
            self._update_index(state, now)
            crash_point("after_index")
            for eff in effects:
                self.stats.counts["duplicates"] += len(eff.ignored)
                if eff.stop and any(state.definition.task(t).workflow is not None
                                    for t, _ in eff.stop):
                    self._cascade_cancel(workflow_id)
            return effects
        log.warning("workflow %s: gave up after %d ETag conflicts; will retry on redelivery",
                    workflow_id, MAX_CONFLICT_RETRIES)
        return None

    def _send(self, state: WorkflowState, new: list[engine.OutboxEntry],
              due: list[engine.OutboxEntry]) -> None:
        entries = new + due
        if not entries:
            return
        sent = self.sender.send(state, entries)
        self.stats.counts["dispatched"] += sum(1 for e in new if e.kind == "dispatch")
        self.stats.counts["resent"] += len(due)
        with self._lock:
            self._sent.setdefault(state.workflow_id, set()).update(sent)
            self._unflushed.setdefault(state.workflow_id, self.clock())

    def _update_index(self, state: WorkflowState, now: float, force: bool = False) -> None:
        """Write status and counts to the index row: at once when the status changes,
        otherwise at most every ``DAGQ_INDEX_INTERVAL`` seconds (the rest by ``flush``)."""
        counts = state.counts()
        key = (state.status, tuple(sorted(counts.items())))
        seen = self._index_seen.get(state.workflow_id)
        if seen is not None and seen[0] == key:
            self._index_dirty.pop(state.workflow_id, None)
            return
        if (not force and seen is not None and seen[0][0] == state.status
                and now - seen[1] < self.settings.index_interval):
            with self._lock:
                self._index_dirty[state.workflow_id] = state
            return
        try:
            self.backend.index.update_progress(
                state.workflow_id, status=state.status, counts=counts, updated_at=now)
        except NotFound:
            log.warning("workflow %s has a state but no index row", state.workflow_id)
            return
        with self._lock:
            self._index_seen[state.workflow_id] = (key, now)
            self._index_dirty.pop(state.workflow_id, None)
        if state.status in TERMINAL_WORKFLOW_STATUSES:
            log.info("workflow %s %s %s", state.workflow_id, state.status, dict(counts))

    def _load(self, workflow_id: str) -> _Cached | None:
        with self._lock:
            cached = self._cache.get(workflow_id)
        if cached is not None:
            return cached
        try:
            data, etag = self.backend.states.read(workflow_id)
        except NotFound:
            return None
        return _Cached(loads(data), etag)

    def _evict(self, workflow_id: str) -> None:
        with self._lock:
            self._cache.pop(workflow_id, None)

    # -- periodic work -----------------------------------------------------------------
    def flush(self, now: float) -> None:
        """Clear sent outbox entries from states that have not been written since."""
        with self._lock:
            ready = [wf for wf, t in self._unflushed.items()
                     if now - t >= self.settings.outbox_flush]
            for wf in ready:
                del self._unflushed[wf]
        for wf in ready:
            if self._sent.get(wf):
                self.commit(wf, lambda state: [])
        with self._lock:
            dirty = [s for wf, s in self._index_dirty.items()
                     if now - self._index_seen.get(wf, ((), 0.0))[1]
                     >= self.settings.index_interval]
        for state in dirty:
            self._update_index(state, self.clock(), force=True)

    def sweep(self, now: float) -> None:
        """Apply cancel requests, start stale pending workflows, re-send lost dispatches
        and fail tasks past their timeout."""
        self._last_sweep = now
        index = self.backend.index
        for row in index.query(cancel_requested=True):
            if row.status not in TERMINAL_WORKFLOW_STATUSES:
                self.commit(row.id, lambda s: [engine.cancel(s, self.clock())])
                self._cascade_cancel(row.id)
        for row in index.query(status="pending"):
            not_before = float(row.extra.get("not_before", 0) or 0)
            if now - max(row.updated_at, not_before) < self.settings.stale_pending:
                continue  # not stale yet (or a delayed child whose start is still due)
            if self._load(row.id) is None:
                log.warning("workflow %s was never stored (its submitter crashed): failing it",
                            row.id)
                index.update_progress(row.id, status="failed", counts=row.counts,
                                      updated_at=now)
                continue
            log.info("starting stale pending workflow %s", row.id)
            self.commit(row.id, lambda s: [engine.start(s, self.clock())])
        grace = self.settings.outbox_grace
        for row in index.query(status="running"):
            with self._lock:
                cached = row.id in self._cache
            if not cached and now - row.updated_at < grace:
                continue  # another coordinator is actively writing it
            self._repair(row.id, now)

    def _cascade_cancel(self, workflow_id: str) -> None:
        """Flag and cancel every active descendant not yet asked to cancel."""
        for row in self.children.descendants(workflow_id):
            if row.status not in TERMINAL_WORKFLOW_STATUSES and not row.cancel_requested:
                log.info("cancelling child workflow %s of %s", row.id, workflow_id)
                self.children.cancel(row.id)

    def _repair(self, workflow_id: str, now: float) -> None:
        """Re-send stale outbox entries and expire overdue tasks (no write if neither)."""
        self.commit(workflow_id,
                    lambda s: [engine.expire(s, self.clock(), self.settings.timeout_grace)])


def _noop(effects: list[engine.Effects]) -> bool:
    """True if no effect changed the state (so the write can be skipped)."""
    return not any(e.changed() for e in effects)

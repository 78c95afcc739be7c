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
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from dagq.config import Settings
from dagq.core import engine
from dagq.core.engine import WorkflowState, loads
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES, OutputRef
from dagq.crashpoints import crash_point
from dagq.errors import NotFound, PreconditionFailed
from dagq.outage import TRANSIENT, Outage
from dagq.ports import Backend, ChildWorkflows, Message
from dagq.protocol.messages import (
    CompletionMessage,
    CompletionQueueMessage,
    decode_and_group,
)
from dagq.protocol.names import COMPLETIONS
from dagq.protocol.outputs import fetch_verified
from dagq.runtime import poison
from dagq.runtime.cancels import cascade_cancel
from dagq.runtime.control import Control
from dagq.runtime.controls import apply_control, handoff_keys
from dagq.runtime.dispatch import OutboxSender
from dagq.runtime.report import Applied, CoordinatorStats
from dagq.runtime.statewrite import write_state
from dagq.runtime.sweep import sweep

log = logging.getLogger("dagq.coordinator")

Mutation = Callable[[WorkflowState], list[engine.Effects]]

MAX_CONFLICT_RETRIES = 8
CACHE_SIZE = 256


@dataclass
class _Cached:
    state: WorkflowState
    etag: str


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
        self.control = Control(backend, clock)
        self.completions = backend.queues.get(COMPLETIONS)
        self.sender = OutboxSender(backend, children)
        self.stats = CoordinatorStats()
        self.lost_resent: dict[str, float] = {}  # dispatch key: when the sweep re-sent it
        self.lost_check_refused = False  # a queue refused to tell its length (said once)
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        self._sent: dict[str, set[str]] = {}
        self._unflushed: dict[str, float] = {}
        self._index_seen: dict[str, tuple[tuple[str, tuple[tuple[str, int], ...]], float]] = {}
        self._index_dirty: dict[str, WorkflowState] = {}
        self._lock = threading.RLock()
        self._last_sweep = 0.0
        self._batch_wait = 0.0 if settings.is_embedded else settings.batch_wait
        self._pending_wait = False
        self._threads = settings.apply_concurrency or (1 if settings.is_embedded else 8)
        self._pool: ThreadPoolExecutor | None = None

    # -- main loop ---------------------------------------------------------------------
    def run(self, stop: threading.Event | None = None,
            until: Callable[[], bool] | None = None) -> None:
        """Loop until ``stop`` is set or ``until()`` is true; sweeps run on their interval."""
        stop = stop or threading.Event()
        outage = Outage("coordinator", log)
        while not stop.is_set() and not (until and until()):
            try:
                self._round()
            except Exception as exc:  # an outage or a bug: back off, carry on, never exit
                if not isinstance(exc, TRANSIENT):
                    log.exception("coordinator round failed; continuing")
                stop.wait(outage.failed(exc))
                continue
            outage.ok()
        try:
            self.flush(float("inf"))  # a clean stop leaves no sent entry behind to re-send
        except TRANSIENT as exc:
            log.warning("could not clear sent outbox entries at exit: %s", exc)

    def _round(self) -> None:
        n = self.step(wait_s=self.settings.idle_poll)
        now = self.clock()
        if n == 0:
            self.flush(now)
        if now - self._last_sweep >= self.settings.sweep_interval:
            self.sweep(now)

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
            poison.undecodable(self, msg.id, msg.body, reason)
        groups = list(grouped.groups.items())
        if self._threads > 1 and len(groups) > 1:  # workflows are independent: overlap
            if self._pool is None:  # their reads, writes and sends
                self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="dagq-apply")
            for _ in self._pool.map(lambda group: self._handle_group(*group), groups):
                pass  # an outage in any group is raised here, as in the loop below
        else:
            for wf, items in groups:
                self._handle_group(wf, items)
        return len(msgs)

    def _handle_group(self, workflow_id: str,
                      items: list[tuple[Message, CompletionQueueMessage]]) -> None:
        ok = self.commit_group(workflow_id, [d for _, d in items])
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
        received = dict(bodies)
        grouped = decode_and_group(received.items())
        result = Applied(rejected=list(grouped.rejected))
        self.stats.counts["dead_lettered"] += len(grouped.rejected)
        for message_id, reason in grouped.rejected:
            poison.undecodable(self, message_id, received[message_id], reason)
        for workflow_id, pairs in grouped.groups.items():
            items = [decoded for _, decoded in pairs]
            if self.commit_group(workflow_id, items) is None:
                result.unapplied.append(workflow_id)
        return result

    def commit_group(self, workflow_id: str,
                     items: list[CompletionQueueMessage]) -> list[engine.Effects] | None:
        """``commit`` one workflow's messages; a failure other than an outage is isolated
        to that workflow (``dagq.runtime.poison``), never raised into the batch."""
        try:
            return self.commit(workflow_id, self.applier(items), handoff=handoff_keys(items))
        except TRANSIENT:
            raise
        except Exception as exc:
            return poison.isolate(self, workflow_id, items, exc)

    def applier(self, items: list[CompletionQueueMessage]) -> Mutation:
        """The mutation that applies ``items`` to a state."""
        return lambda state: self._apply(state, items)

    def _apply(self, state: WorkflowState,
               items: Iterable[CompletionQueueMessage]) -> list[engine.Effects]:
        now = self.clock()
        effects: list[engine.Effects] = []
        batch: list[engine.Completion] = []
        for item in map(poison.screen, items):
            if isinstance(item, CompletionMessage):
                self.stats.counts["completions"] += 1
                batch.append(engine.Completion(
                    task=item.task, attempt=item.attempt, success=item.success,
                    output=item.output, output_ref=item.output_ref, error=item.error,
                    released=item.released))
                continue
            if batch:
                effects.append(engine.apply(state, batch, now, resolve=self.resolve))
                batch = []
            self.stats.counts["controls"] += 1
            if item.applied:  # in the state already: decide what a retry reset
                if item.action == "retry":
                    effects.append(engine.resume(state, now, resolve=self.resolve))
                continue
            effects.append(apply_control(state, item, now))
        if batch:
            effects.append(engine.apply(state, batch, now, resolve=self.resolve))
        return effects

    def resolve(self, ref: OutputRef) -> Any:
        """The value an output reference names (read and verified)."""
        return json.loads(fetch_verified(self.backend, ref))

    # -- the write protocol --------------------------------------------------------------
    def commit(self, workflow_id: str, mutate: Mutation,
               handoff: frozenset[str] = frozenset()) -> list[engine.Effects] | None:
        """Apply ``mutate`` under ETag CAS, send the new outbox entries, update the index.

        ``handoff`` names outbox entries another writer (cancel, retry) recorded for
        this coordinator to send. Returns the effects, or ``None`` when the workflow does
        not exist or the write kept conflicting (the caller must not acknowledge;
        redelivery retries).
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
            outbox = state.outbox
            mine = {k for k in self._sent.get(workflow_id, ()) if k in outbox}
            engine.clear_outbox(state, mine)
            due = [e for e in engine.outbox_due(state, now, self.settings.outbox_grace)
                   if e.key in before]
            due += [e for k, e in state.outbox.items() if k in handoff and k in before
                    and k not in mine and e not in due]
            if not mine and not due and state.outbox.keys() == before and _noop(effects):
                if from_cache and not self._still_stored(workflow_id, cached.etag):
                    # another coordinator wrote since: "nothing to do" (and so
                    # acknowledging the messages) must be decided on the stored state
                    self.forget(workflow_id)
                    del state, cached, effects  # let the stale copy go before the re-read
                    continue
                if not from_cache:  # read and unchanged: keep it (the next look is cheap)
                    self._remember(workflow_id, cached)
                self._update_index(state, now)
                for eff in effects:  # a batch of only duplicates changes nothing
                    self.stats.counts["duplicates"] += len(eff.ignored)
                return effects
            try:
                etag, written = write_state(self.backend.states, workflow_id, state,
                                            cached.etag)
            except PreconditionFailed:
                self.stats.counts["conflicts"] += 1
                self.forget(workflow_id)
                continue
            except NotFound:
                self.forget(workflow_id)
                return []
            except BaseException:
                self.forget(workflow_id)  # its change records no longer match the store
                raise
            self.stats.counts["writes"] += 1
            self.stats.counts["state_bytes"] += written
            self._remember(workflow_id, _Cached(state, etag))
            with self._lock:
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
                    cascade_cancel(self.children, workflow_id)
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

    def _remember(self, workflow_id: str, cached: _Cached) -> None:
        with self._lock:
            self._cache[workflow_id] = cached
            self._cache.move_to_end(workflow_id)
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)

    def _still_stored(self, workflow_id: str, etag: str) -> bool:
        """True if the stored state is still the one cached under ``etag``: one small
        request instead of reading and decoding the whole state again."""
        try:
            return self.backend.states.etag(workflow_id) == etag
        except NotFound:
            return False

    def forget(self, workflow_id: str) -> None:
        """Drop the cached state of ``workflow_id`` (it may be half-mutated)."""
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
                poison.guarded(self, wf, lambda state: [])
        with self._lock:
            dirty = [s for wf, s in self._index_dirty.items()
                     if now - self._index_seen.get(wf, ((), 0.0))[1]
                     >= self.settings.index_interval]
        for state in dirty:
            self._update_index(state, self.clock(), force=True)

    def sweep(self, now: float) -> None:
        """Finish cancels, start stale pending workflows, re-send lost dispatches and fail
        tasks past their timeout (``dagq.runtime.sweep``)."""
        self._last_sweep = now
        sweep(self, now)

    def cached_states(self) -> list[WorkflowState]:
        """The states this coordinator holds now (a copy of the list)."""
        with self._lock:
            return [c.state for c in self._cache.values()]

    def caches(self, workflow_id: str) -> bool:
        """True if this coordinator holds ``workflow_id``'s state in its cache."""
        with self._lock:
            return workflow_id in self._cache


def _noop(effects: list[engine.Effects]) -> bool:
    """True if no effect changed the state (so the write can be skipped)."""
    return not any(e.changed() for e in effects)

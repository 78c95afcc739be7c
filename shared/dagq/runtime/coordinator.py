"""The coordinator: applies completions to workflow states and dispatches what became ready.

One loop: receive a batch from the completion queue, group it by workflow, apply each
group with the core, write each state once under its ETag, send the outbox entries the
write recorded, update the index row, then acknowledge. Sweeps repair what crashes leave
behind. The parts: ``dagq.runtime.states`` (the one state writer: cache, CAS, index row),
``dagq.runtime.commit`` (one workflow's write protocol), ``dagq.runtime.sweep``;
docs/coordinator.md walks through every crash point.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dagq import metrics
from dagq.config import Settings
from dagq.core import engine
from dagq.core.engine import WorkflowState
from dagq.core.model import OutputRef
from dagq.crashpoints import crash_point
from dagq.outage import TRANSIENT, Outage
from dagq.ports import Backend, ChildWorkflows, Message
from dagq.protocol.messages import CompletionQueueMessage, decode_and_group
from dagq.protocol.names import COMPLETIONS
from dagq.runtime import metering, poison, webhooks
from dagq.runtime.commit import Committer
from dagq.runtime.committing import Mutation
from dagq.runtime.control import Control
from dagq.runtime.dispatch import OutboxSender
from dagq.runtime.report import Applied, CoordinatorStats
from dagq.runtime.states import StateWriter
from dagq.runtime.sweep import Sweeper

log = logging.getLogger("dagq.coordinator")


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
        self.stats = CoordinatorStats()
        self.writer = StateWriter(backend, clock=clock, counts=self.stats.counts,
                                  index_interval=settings.index_interval)
        self.control = Control(backend, clock)
        self.completions = backend.queues.get(COMPLETIONS)
        self.sender = OutboxSender(backend, children, clock)
        self.committer = Committer(backend, self.writer, self.sender, children=children,
                                   settings=settings, counts=self.stats.counts, clock=clock)
        self.sweeper = Sweeper(backend, self.writer, self.committer, control=self.control,
                               sender=self.sender, children=children, settings=settings,
                               counts=self.stats.counts, clock=clock)
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
        delivering = webhooks.start(self.backend)  # workflow hooks, never on this thread
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
        delivering.set()

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
            poison.undecodable(self.committer, msg.id, msg.body, reason)
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
        if metrics.sink is not None:  # optional metrics (docs/metrics.md)
            metering.applied(metrics.sink, self.backend, workflow_id, [d for _, d in items],
                             [m.enqueued_at for m, _ in items], ok, self.clock())
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
            poison.undecodable(self.committer, message_id, received[message_id], reason)
        for workflow_id, pairs in grouped.groups.items():
            items = [decoded for _, decoded in pairs]
            effects = self.commit_group(workflow_id, items)
            if effects is None:
                result.unapplied.append(workflow_id)
            elif metrics.sink is not None:  # optional metrics (docs/metrics.md)
                metering.applied(metrics.sink, self.backend, workflow_id, items,
                                 [0.0] * len(items), effects, self.clock())
        return result

    # -- the write protocol (dagq.runtime.commit, dagq.runtime.states) -------------------
    def commit_group(self, workflow_id: str,
                     items: list[CompletionQueueMessage]) -> list[engine.Effects] | None:
        """``commit`` one workflow's messages, a failure isolated to that workflow."""
        return self.committer.commit_group(workflow_id, items)

    def commit(self, workflow_id: str, mutate: Mutation,
               handoff: frozenset[str] = frozenset()) -> list[engine.Effects] | None:
        """Apply ``mutate`` under ETag CAS, send the new outbox entries, update the index
        (``Committer.commit``); None when the write kept conflicting."""
        return self.committer.commit(workflow_id, mutate, handoff)

    def applier(self, items: list[CompletionQueueMessage]) -> Mutation:
        """The mutation that applies ``items`` to a state."""
        return self.committer.applier(items)

    def resolve(self, ref: OutputRef) -> Any:
        """The value an output reference names (read and verified)."""
        return self.committer.resolve(ref)

    def forget(self, workflow_id: str) -> None:
        """Drop the cached state of ``workflow_id`` (it may be half-mutated)."""
        self.writer.forget(workflow_id)

    def cached_states(self) -> list[WorkflowState]:
        """The states this coordinator holds now (a copy of the list)."""
        return self.writer.cached_states()

    def caches(self, workflow_id: str) -> bool:
        """True if this coordinator holds ``workflow_id``'s state in its cache."""
        return self.writer.caches(workflow_id)

    # -- periodic work -----------------------------------------------------------------
    def flush(self, now: float) -> None:
        """Clear sent outbox entries from states that have not been written since, and
        write the index counts held back."""
        self.committer.flush(now)

    def sweep(self, now: float) -> None:
        """Finish cancels, start stale pending workflows, re-send lost dispatches and fail
        tasks past their timeout (``dagq.runtime.sweep``)."""
        self._last_sweep = now
        self.sweeper.run(now)
        if metrics.sink is not None:
            metering.sample(metrics.sink, self.backend)

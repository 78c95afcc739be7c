"""The coordinator's periodic repair sweep: what crashes and lost messages leave behind.

Every ``DAGQ_SWEEP_INTERVAL`` the sweep finishes cancels, starts pending workflows whose
submitter stopped before starting them, and looks at every running workflow: re-sends
outbox entries nobody cleared, fails tasks past their timeout and decides tasks a retry
reset. A running workflow this coordinator has cached costs one small ETag request when
nothing is to be done (its state is re-read only when another writer changed it).

It also looks for task messages that were lost: an attempt dispatched more than
``DAGQ_LOST_MESSAGE_AFTER`` seconds ago that no live worker reports, while its queue
holds no message at all, can only be waiting for a message that no longer exists (a
queue purged by hand, a message expired or dropped by the service). Its message is sent
again under the same dispatch key (with a fresh message id, so that queues which drop
repeated ids accept it); if the first copy was only slow, the claims protocol runs the
attempt once and drops the other copy.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

from dagq.config import Settings
from dagq.core import engine
from dagq.errors import DagqError, MissingRight
from dagq.ports import Backend, ChildWorkflows
from dagq.protocol import names
from dagq.protocol.heartbeats import executing_keys
from dagq.runtime import poison
from dagq.runtime.cache_lookup import Hit
from dagq.runtime.cancels import finish_cancels
from dagq.runtime.committing import Committing
from dagq.runtime.control import Control
from dagq.runtime.dispatch import OutboxSender
from dagq.runtime.states import StateWriter

log = logging.getLogger("dagq.coordinator")


class Sweeper:
    """The repair sweep of one coordinator; ``run`` is one sweep."""

    def __init__(self, backend: Backend, writer: StateWriter, commits: Committing, *,
                 control: Control, sender: OutboxSender, children: ChildWorkflows,
                 settings: Settings, counts: Counter[str],
                 clock: Callable[[], float]) -> None:
        """``writer``: the coordinator's (its cache says which workflows it holds);
        ``commits``: its write protocol; ``counts``: its counters."""
        self.backend = backend
        self.writer = writer
        self.commits = commits
        self.control = control
        self.sender = sender
        self.children = children
        self.settings = settings
        self.counts = counts
        self.clock = clock
        self.lost_resent: dict[str, float] = {}  # dispatch key: when the sweep re-sent it
        self.lost_check_refused = False  # a queue refused to tell its length (said once)

    def run(self, now: float) -> None:
        """One sweep of every pending, running and cancelling workflow of the store."""
        index = self.backend.index
        finish_cancels(self.backend, now, commits=self.commits, control=self.control,
                       children=self.children, clock=self.clock)
        for row in index.query(status="pending"):
            not_before = float(row.extra.get("not_before", 0) or 0)
            if now - max(row.updated_at, not_before) < self.settings.stale_pending:
                continue  # not stale yet (or a delayed child whose start is still due)
            if not self.writer.exists(row.id):
                log.warning("workflow %s was never stored (its submitter crashed): "
                            "failing it", row.id)
                self.writer.mark_failed(row.id, row.counts, now)
                continue
            log.info("starting stale pending workflow %s", row.id)
            poison.guarded(self.commits, self.writer, row.id,
                           lambda s: [engine.start(s, self.clock())])
        grace = self.settings.outbox_grace
        for row in index.query(status="running"):
            if not self.writer.caches(row.id) and now - row.updated_at < grace:
                continue  # another coordinator is actively writing it
            self.repair(row.id)
        self.resend_lost(now)
        self.sweep_slots()

    def sweep_slots(self) -> None:
        """Drop concurrency-key holders whose attempt no longer runs (a coordinator died
        before releasing them) and send the waiters that frees (``dagq.runtime.slots``):
        one records query, plus a state read per workflow this coordinator does not
        hold up to date."""
        try:
            wake = self.sender.slots.sweep_holders(self._fresh_state)
        except DagqError as exc:  # an outage: the next sweep looks again
            log.warning("could not check the holders of concurrency keys: %s", exc)
            return
        if wake:
            self.commits.wake(wake)

    def _fresh_state(self, workflow_id: str) -> engine.WorkflowState | None:
        loaded = self.writer.cached(workflow_id)
        if loaded is not None and self.writer.still_stored(workflow_id, loaded.etag):
            return loaded.state
        fresh = self.writer.read(workflow_id)
        return None if fresh is None else fresh.state

    def repair(self, workflow_id: str) -> None:
        """Re-send stale outbox entries, expire overdue tasks and decide tasks a retry
        reset whose control message was lost (no write if none of these); a state that
        cannot be updated fails its workflow instead of stopping the sweep."""
        poison.guarded(self.commits, self.writer, workflow_id, lambda s: [
            engine.expire(s, self.clock(), self.settings.timeout_grace),
            engine.resume(s, self.clock(), resolve=self.commits.resolve)])  # lost retry

    def resend_lost(self, now: float) -> int:
        """Send again the messages of attempts waiting unstarted past
        ``DAGQ_LOST_MESSAGE_AFTER`` on an empty queue (cached workflows only: the
        repair above caches every running one); how many were sent. Only queues found
        empty are looked into, so a backlog costs one length request per queue and no
        scan."""
        after = self.settings.lost_message_after
        if after <= 0:
            return 0
        for key in [k for k, t in self.lost_resent.items() if now - t >= 2 * after]:
            del self.lost_resent[key]
        states = [s for s in self.writer.cached_states()
                  if s.running_set and not s.is_terminal()]
        empty = self._empty_queues({q for s in states for q in s.graph.queue_names})
        if not empty:
            return 0
        waiting = [(s, d) for s in states
                   for d in engine.waiting_dispatches(s, now, after, empty)
                   if now - self.lost_resent.get(d.key, float("-inf")) >= after]
        if not waiting:
            return 0
        sent = 0
        try:
            executing = executing_keys(self.backend.records, now,
                                       self.settings.heartbeat_interval,
                                       among=[d.key for _, d in waiting])
            for state, d in waiting:
                if d.key in executing:
                    continue
                at = state.dispatched_at[state.graph.index[d.task]] or now
                log.warning("re-sending the task message of %s: dispatched %.0fs ago, no "
                            "worker has started it and queue %r holds no message (it was "
                            "lost)", d.key, now - at, d.queue)
                try:
                    body = self.sender.task_message(state, d)
                except DagqError:
                    raise
                except Exception as exc:  # it was built once; never let one stop the sweep
                    log.warning("could not rebuild the task message of %s: %s", d.key, exc)
                    continue
                if isinstance(body, Hit):  # cached since: answer it from there
                    self.sender.cache.answer(state, d, body)
                    self.lost_resent[d.key] = now  # answered: not again next sweep
                    continue
                self.backend.queues.get(d.queue).send(
                    body, message_id=names.resent_id(d.key, now))
                self.lost_resent[d.key] = now
                self.counts["lost_resent"] += 1
                sent += 1
        except DagqError as exc:  # an outage: the next sweep looks again
            log.warning("could not re-send lost task messages: %s", exc)
        return sent

    def _empty_queues(self, queues: set[str]) -> set[str]:
        """The queues among ``queues`` that hold no message at all (visible or not)."""
        empty: set[str] = set()
        for queue in sorted(queues):
            try:
                if self.backend.queues.get(queue).approximate_count() == 0:
                    empty.add(queue)
            except MissingRight as exc:  # Service Bus without Manage: say it once
                if not self.lost_check_refused:
                    self.lost_check_refused = True
                    log.warning("not looking for lost task messages on queue %r: %s",
                                queue, exc)
            except DagqError as exc:
                log.warning("could not read the length of queue %r: %s", queue, exc)
        return empty

"""The coordinator's write protocol for one workflow: apply, write once, send, index.

``Committer.commit`` applies a mutation (a batch of completions and controls, or a repair)
to the state through ``dagq.runtime.states.StateWriter``, which writes it under its ETag
and retries a lost race on the newer state. In the same write the outbox records every
message the mutation decided, and the entries this process sent earlier are cleared;
the messages go out only after that write, then the index row is updated. A state
nothing changed is not written. Entries sent but not cleared by a later write are
cleared by ``flush`` once the workflow has been idle for ``DAGQ_OUTBOX_FLUSH``.
docs/coordinator.md walks through the crash points on the way.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from dagq.config import Settings
from dagq.core import engine
from dagq.core.engine import WorkflowState
from dagq.core.model import OutputRef
from dagq.crashpoints import crash_point
from dagq.outage import TRANSIENT
from dagq.ports import Backend, ChildWorkflows
from dagq.protocol.messages import CompletionMessage, CompletionQueueMessage
from dagq.protocol.outputs import fetch_verified
from dagq.runtime import poison
from dagq.runtime.cancels import cascade_cancel
from dagq.runtime.committing import Mutation
from dagq.runtime.controls import apply_control, handoff_keys
from dagq.runtime.dispatch import OutboxSender
from dagq.runtime.slots import by_workflow, keyed, running_keys
from dagq.runtime.states import MAX_CONFLICT_RETRIES, KeptChanging, StateGone, StateWriter

log = logging.getLogger("dagq.coordinator")


@dataclass
class _Batch:
    """What one try of a commit decided, before its write."""

    now: float
    before: set[str]
    effects: list[engine.Effects]
    mine: set[str]
    due: list[engine.OutboxEntry]
    keyed: dict[str, str] | None = None
    """Attempts with a concurrency key running before the mutation (``dagq.runtime.slots``)."""


class Committer:
    """Commits mutations to the workflows of one coordinator (``Committing``)."""

    def __init__(self, backend: Backend, writer: StateWriter, sender: OutboxSender, *,
                 children: ChildWorkflows, settings: Settings, counts: Counter[str],
                 clock: Callable[[], float]) -> None:
        """``counts``: the coordinator's counters; ``children`` cancels the child
        workflows of a stopped task."""
        self.backend = backend
        self.writer = writer
        self.sender = sender
        self.children = children
        self.settings = settings
        self.counts = counts
        self.clock = clock
        self._sent: dict[str, set[str]] = {}  # outbox keys sent here, not yet cleared
        self._unflushed: dict[str, float] = {}  # workflow: when it first sent uncleared
        self._lock = threading.Lock()

    def commit_group(self, workflow_id: str,
                     items: list[CompletionQueueMessage]) -> list[engine.Effects] | None:
        """``commit`` one workflow's messages; a failure other than an outage is isolated
        to that workflow (``dagq.runtime.poison``), never raised into the batch."""
        try:
            return self.commit(workflow_id, self.applier(items), handoff=handoff_keys(items))
        except TRANSIENT:
            raise
        except Exception as exc:
            return poison.isolate(self, self.writer, workflow_id, items, exc)

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
                self.counts["completions"] += 1
                batch.append(engine.Completion(
                    task=item.task, attempt=item.attempt, success=item.success,
                    output=item.output, output_ref=item.output_ref, error=item.error,
                    released=item.released, cached=item.cached))
                continue
            if batch:
                effects.append(engine.apply(state, batch, now, resolve=self.resolve))
                batch = []
            self.counts["controls"] += 1
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

    def commit(self, workflow_id: str, mutate: Mutation,
               handoff: frozenset[str] = frozenset()) -> list[engine.Effects] | None:
        """Apply ``mutate`` under ETag CAS, send the new outbox entries, update the index.

        ``handoff`` names outbox entries another writer (cancel, retry) recorded for
        this coordinator to send. Returns the effects, or ``None`` when the write kept
        conflicting (the caller must not acknowledge; redelivery retries); ``[]`` when
        the workflow does not exist.
        """
        def edit(state: WorkflowState) -> tuple[_Batch, bool]:
            now = self.clock()
            before = set(state.outbox)
            held = running_keys(state) if keyed(state.definition) else None
            effects = mutate(state)
            crash_point("after_apply")
            if any(e.expanded for e in effects):
                crash_point("map_after_apply")
            outbox = state.outbox
            mine = {k for k in self._sent.get(workflow_id, ()) if k in outbox}
            engine.clear_outbox(state, mine)
            due = [e for e in engine.outbox_due(state, now, self.settings.outbox_grace)
                   if e.key in before]
            due += [e for k, e in state.outbox.items() if k in handoff and k in before
                    and k not in mine and e not in due]
            write = bool(mine or due or state.outbox.keys() != before or not _noop(effects))
            return _Batch(now, before, effects, mine, due, held), write

        try:
            done = self.writer.commit(workflow_id, edit)
        except StateGone:
            return []
        except KeptChanging:
            log.warning("workflow %s: gave up after %d ETag conflicts; will retry on "
                        "redelivery", workflow_id, MAX_CONFLICT_RETRIES)
            return None
        if done is None:
            log.warning("workflow %s does not exist; dropping its messages", workflow_id)
            return []
        state, batch = done.state, done.result
        if not done.written:
            self.writer.update_index(state, batch.now)
            for eff in batch.effects:  # a batch of only duplicates changes nothing
                self.counts["duplicates"] += len(eff.ignored)
            return batch.effects
        with self._lock:
            self._sent[workflow_id] = self._sent.get(workflow_id, set()) - batch.mine
        crash_point("after_write")
        expanded = any(e.expanded for e in batch.effects)
        if expanded:
            crash_point("map_after_write")
        self._send(state, [e for k, e in state.outbox.items() if k not in batch.before],
                   batch.due)
        crash_point("after_send")
        if expanded:
            crash_point("map_after_send")
        self.writer.update_index(state, batch.now)
        crash_point("after_index")
        if batch.keyed:
            self.release_ended(state, batch.keyed)
        for eff in batch.effects:
            self.counts["duplicates"] += len(eff.ignored)
            if eff.stop and any(state.task_def(t).workflow is not None
                                for t, _ in eff.stop):
                cascade_cancel(self.children, workflow_id)
        return batch.effects

    def release_ended(self, state: WorkflowState, before: dict[str, str]) -> None:
        """Give back the slots of the keyed attempts that ended in this write, and send
        the waiting attempts a free slot lets start (``dagq.runtime.slots``)."""
        now_running = running_keys(state)
        ended: dict[str, list[str]] = {}
        for holder, key in before.items():
            if holder not in now_running:
                ended.setdefault(key, []).append(holder)
        wake: list[str] = []
        for key, holders in ended.items():
            wake += self.sender.slots.release(key, holders)
        self.wake(wake)

    def wake(self, holders: list[str]) -> None:
        """Send the held outbox entries ``holders`` (dispatch keys waiting for a slot)."""
        for workflow_id, keys in by_workflow(holders).items():
            self.counts["slot_wakes"] += len(keys)
            try:  # the entries stay in the outbox: the periodic re-send finds them too
                self.commit(workflow_id, lambda state: [], handoff=keys)
            except Exception as exc:
                log.warning("could not send the attempts %s waiting for a free slot: %s",
                            ", ".join(sorted(keys)), exc)

    def _send(self, state: WorkflowState, new: list[engine.OutboxEntry],
              due: list[engine.OutboxEntry]) -> None:
        entries = new + due
        if not entries:
            return
        sent = self.sender.send(state, entries)
        self.counts["dispatched"] += sum(1 for e in new if e.kind == "dispatch")
        self.counts["resent"] += len(due)
        with self._lock:
            self._sent.setdefault(state.workflow_id, set()).update(sent)
            self._unflushed.setdefault(state.workflow_id, self.clock())

    def flush(self, now: float) -> None:
        """Clear sent outbox entries from states that have not been written since, and
        write the index counts held back (``StateWriter.flush_index``)."""
        with self._lock:
            ready = [wf for wf, t in self._unflushed.items()
                     if now - t >= self.settings.outbox_flush]
            for wf in ready:
                del self._unflushed[wf]
        for wf in ready:
            if self._sent.get(wf):
                poison.guarded(self, self.writer, wf, lambda state: [])
        self.writer.flush_index(now)


def _noop(effects: list[engine.Effects]) -> bool:
    """True if no effect changed the state (so the write can be skipped)."""
    return not any(e.changed() for e in effects)

"""Cancel and retry, applied to the stored state before the request returns.

Both are compare-and-swap writes of the workflow state through the pure core, made by
the one state writer (``dagq.runtime.states``: a fresh read, a full snapshot, like the
first write of a submission); the coordinator still dispatches. A control message with
``applied=True`` tells it the action is in the state: for a retry it decides the reset
tasks (``engine.resume``), and it sends the outbox entries the write recorded (``send``,
e.g. the notice of a cancelled child workflow to its parent).

Cancel also:

* writes a hint record (partition ``cancels``) that workers poll with one read per
  interval, to stop attempts they are running. The hint and the index's
  ``cancel_requested`` flag are derived from the state, never from the request: after
  its state write, every cancel or retry runs ``publish``, which writes both from the
  state and re-reads the state until they agree (see ``dagq.protocol.cancels`` for why
  concurrent requests then always end agreeing with the last state write);
* ends ``cancelled`` every attempt it waits for that no worker is executing. A worker
  announces an attempt by claiming it *before* it checks the workflow and starts it,
  and it trusts a state read for at most ``ADMISSION_TTL_S``; so once that long has
  passed since the cancel was written, an attempt that no live worker's claim or
  heartbeat holds (``dagq.protocol.heartbeats``) can never start (the worker's check
  sees the cancel and drops the message). This needs reads that see every completed
  write: SQLite gives that, and so do Blob and Table Storage, which are strongly
  consistent in the primary region
  (https://docs.microsoft.com/en-us/azure/storage/blobs/concurrency-manage).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Container
from dataclasses import replace

from dagq.core import engine
from dagq.core.engine import WorkflowState
from dagq.crashpoints import crash_point
from dagq.errors import (
    DagqError,
    NotFound,
    TaskError,
    TaskNotFound,
    WorkflowFinished,
    WorkflowNotFound,
)
from dagq.ports import Backend
from dagq.protocol import names
from dagq.protocol.cancels import ADMISSION_TTL_S, CANCELS
from dagq.protocol.heartbeats import executing_keys
from dagq.protocol.messages import ControlAction, ControlMessage
from dagq.runtime.states import StateWriter

MAX_TRIES = 16

Mutation = Callable[[WorkflowState, float], "engine.Effects | None"]


class Control:
    """Cancel, retry and settle workflows stored in ``backend``."""

    def __init__(self, backend: Backend, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, *,
                 writer: StateWriter | None = None) -> None:
        """``writer`` writes the states and index rows (by default one of its own on
        ``backend``, with ``clock``)."""
        self.backend = backend
        self.clock = clock
        self.sleep = sleep
        self.writer = writer if writer is not None else StateWriter(backend, clock=clock)

    def cancel(self, workflow_id: str, *, children: tuple[str, ...] = (),
               settle: bool = True, on_written: Callable[[], object] | None = None,
               reason: str | None = None) -> WorkflowState:
        """Cancel the workflow (and the ``children`` workflows, where still active):
        tasks that have not started are ``cancelled`` and running ones are asked to stop
        when this returns. Idempotent while it runs; ``WorkflowFinished`` if it already
        ended. With ``settle`` (the default), waits ``ADMISSION_TTL_S`` once when
        attempts are in flight and cancels those no worker runs. ``on_written`` is
        called once the cancels are in the states (e.g. to stop local tasks at once).
        ``reason`` is kept with each state and in the cancelled tasks' errors."""
        state = self._cancel_one(workflow_id, reason)
        states = [state]
        for child in children:
            with contextlib.suppress(WorkflowFinished, WorkflowNotFound):
                states.append(self._cancel_one(child, reason))
        written = time.monotonic()  # after the last cancel write
        if on_written is not None:
            on_written()
        waiting = [s.workflow_id for s in states if engine.stopping_keys(s)]
        if settle and waiting:
            self.sleep(max(0.0, written + ADMISSION_TTL_S - time.monotonic()))
            executing = executing_keys(self.backend.records, self.clock(), among=[
                key for s in states for key in engine.stopping_keys(s)])
            for wf in waiting:
                settled = self.settle(wf, executing)
                if wf == workflow_id and settled is not None:
                    state = settled
        return state

    def _cancel_one(self, workflow_id: str, reason: str | None = None) -> WorkflowState:
        def mutate(state: WorkflowState, now: float) -> engine.Effects | None:
            if state.is_terminal():
                raise WorkflowFinished(
                    f"workflow {workflow_id!r} is already {state.status}: nothing to cancel",
                    workflow_id, state.status)
            fx = engine.cancel(state, now, reason)
            return fx if fx.changed() else None

        # the hint first: a cancel that stops after its state write has workers told
        # already (and the sweep finds it by its hint); an extra hint only costs a read
        self.backend.records.put(CANCELS, workflow_id, {"at": self.clock()})
        state, keys, etag = self._commit_or_publish(workflow_id, mutate)
        crash_point("control_written")
        self.publish(workflow_id, state, etag)
        self._index(state)
        self._hand_over(workflow_id, "cancel", keys)
        return state

    def settle(self, workflow_id: str,
               executing: Container[str] | None = None) -> WorkflowState | None:
        """End ``cancelled`` the attempts a cancel waits for that no live worker runs
        (``executing``: keys from the heartbeats and claims, read here if not given:
        ``dagq.protocol.heartbeats.executing_keys`` asked about these). Call it at
        least ``ADMISSION_TTL_S`` after the cancel was written. The new state, or None
        if nothing changed."""
        stored = self.writer.read(workflow_id)
        if stored is None:
            return None
        waiting = engine.stopping_keys(stored.state)
        if not waiting:
            return None
        if executing is None:
            executing = executing_keys(self.backend.records, self.clock(), among=waiting)
        if all(k in executing for k in waiting):
            return None
        seen = executing

        def mutate(state: WorkflowState, now: float) -> engine.Effects | None:
            fx = engine.cancel_unstarted(state, now, seen)
            return fx if fx.changed() else None

        state, keys, _ = self._commit(workflow_id, mutate)
        self._index(state)
        self._hand_over(workflow_id, "cancel", keys)
        return state

    def retry(self, workflow_id: str, *, parent: engine.ParentLink | None = None,
              request_id: str | None = None,
              tasks: tuple[str, ...] = ()) -> tuple[str, WorkflowState]:
        """Reset failed, upstream-failed and cancelled tasks to ``pending`` (and withdraw
        a cancel) when this returns; the coordinator decides and dispatches them.
        Idempotent per ``request_id``; ``WorkflowFinished`` for a completed workflow.
        ``parent`` re-attaches a child workflow to its parent task's new attempt.
        With ``tasks``, those tasks and every task after them run again, whatever their
        status (``TaskError`` if one is running; a completed workflow runs again)."""
        rid = request_id or names.request_id(workflow_id, "retry", uuid.uuid4().hex[:12])

        def mutate(state: WorkflowState, now: float) -> engine.Effects | None:
            if rid in state.retry_ids:
                return None
            if tasks:
                try:
                    return engine.retry(state, now, rid, dispatch=False, tasks=tasks)
                except KeyError as exc:
                    raise TaskNotFound(str(exc.args[0])) from None
                except ValueError as exc:
                    raise TaskError(str(exc)) from None
            if state.status == "completed":
                raise WorkflowFinished(
                    f"workflow {workflow_id!r} is already completed: nothing to retry",
                    workflow_id, state.status)
            if parent is not None and state.parent is not None:
                state.parent = replace(state.parent, attempt=parent.attempt)
            return engine.retry(state, now, rid, dispatch=False)

        # the flag first: a retry that stops after its state write leaves a hint without
        # a flag, which the sweep puts right (a flag without the state's cancel it would
        # apply, for older clients)
        self._flag(workflow_id, False)
        state, keys, etag = self._commit_or_publish(workflow_id, mutate)
        crash_point("control_written")
        self.publish(workflow_id, state, etag)
        self._index(state)
        self._hand_over(workflow_id, "retry", keys, rid,
                        parent.attempt if parent is not None else None)
        return rid, state

    def suspend(self, workflow_id: str, suspended: bool = True) -> WorkflowState:
        """Suspend a running workflow (no task starts; running ones finish), or let it go
        on (``suspended=False``: the tasks that became ready are sent). In the state
        when this returns; ``WorkflowFinished`` for a workflow that already ended."""
        def mutate(state: WorkflowState, now: float) -> engine.Effects | None:
            if state.is_terminal():
                raise WorkflowFinished(
                    f"workflow {workflow_id!r} is already {state.status}: nothing to "
                    f"{'suspend' if suspended else 'resume'}", workflow_id, state.status)
            fx = engine.suspend(state, now) if suspended else engine.unsuspend(state, now)
            return fx if fx.changed() else None

        state, keys, _ = self._commit(workflow_id, mutate)
        self._index(state)
        self._hand_over(workflow_id, "suspend" if suspended else "resume", keys)
        return state

    # -- the stop signal ----------------------------------------------------------------
    def publish(self, workflow_id: str, state: WorkflowState | None = None,
                etag: str | None = None) -> bool:
        """Make the cancel hint and the index flag say what the stored state says, and
        keep at it until a state read made after the last of those writes agrees (the
        protocol in ``dagq.protocol.cancels``). ``state`` and ``etag``: what the caller
        just wrote or read (read here if not given). Safe at any time, from anywhere;
        True if the hint now asks workers to stop."""
        if state is None or etag is None:
            state, etag = self._read(workflow_id)
        want = state is not None and state.cancel_requested
        for _ in range(MAX_TRIES):
            if want:  # hint, then flag; a withdrawal in the reverse order
                self.backend.records.put(CANCELS, workflow_id, {"at": self.clock()})
                self._flag(workflow_id, True)
            else:
                self._flag(workflow_id, False)
                self.backend.records.delete(CANCELS, workflow_id)
            if etag is not None and self.writer.still_stored(workflow_id, etag):
                return want  # no state write since the one these were taken from
            state, etag = self._read(workflow_id)
            if want == (state is not None and state.cancel_requested):
                return want  # a state read after the writes agrees
            want = not want
        return want  # still changing: the request that wrote last publishes after us

    def _read(self, workflow_id: str) -> tuple[WorkflowState | None, str | None]:
        stored = self.writer.read(workflow_id)
        return (None, None) if stored is None else (stored.state, stored.etag)

    def _flag(self, workflow_id: str, requested: bool) -> None:
        with contextlib.suppress(NotFound):  # no index row: the coordinator reports it
            self.backend.index.request_cancel(workflow_id, requested)

    # -- the write ----------------------------------------------------------------------
    def _commit_or_publish(self, workflow_id: str, mutate: Mutation
                           ) -> tuple[WorkflowState, list[str], str]:
        """``_commit``; if it fails, first make the stop signal match the state again
        (what the request wrote before it is undone), then raise."""
        try:
            return self._commit(workflow_id, mutate)
        except DagqError:
            with contextlib.suppress(DagqError):
                self.publish(workflow_id)
            raise

    def _commit(self, workflow_id: str, mutate: Mutation
                ) -> tuple[WorkflowState, list[str], str]:
        """Read, mutate, write a snapshot under the ETag (again on the newer state after
        a lost race); the state, the new outbox keys and the stored state's ETag."""
        def edit(state: WorkflowState) -> tuple[list[str], bool]:
            before = set(state.outbox)
            if mutate(state, self.clock()) is None:
                return [], False
            return [k for k in state.outbox if k not in before], True

        done = self.writer.commit(workflow_id, edit, cached=False, snapshot=True,
                                  tries=MAX_TRIES)
        if done is None:
            raise WorkflowNotFound(f"no workflow with id {workflow_id!r}")
        return done.state, done.result, done.etag

    def _index(self, state: WorkflowState) -> None:
        self.writer.put_progress(state)  # no index row: the coordinator reports it

    def _hand_over(self, workflow_id: str, action: ControlAction, keys: list[str],
                   request_id: str | None = None, parent_attempt: int | None = None) -> None:
        """Tell the coordinator: the action is applied; send these outbox entries."""
        rid = request_id or names.request_id(workflow_id, action, uuid.uuid4().hex[:12])
        body = ControlMessage(workflow_id, action, rid, parent_attempt, applied=True,
                              send=tuple(keys)).encode()
        self.backend.queues.get(names.COMPLETIONS).send(
            body, message_id=names.control_id(rid, action),
            session_id=names.session_id(workflow_id))

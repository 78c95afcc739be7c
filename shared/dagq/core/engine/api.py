"""The workflow engine: pure, deterministic functions that advance a ``WorkflowState``.

Every function mutates the state in place and returns the ``Effects`` it decided; the
caller supplies the time (``now``, epoch seconds) and ids, so the same inputs always give
the same result. Messages to send (task dispatches, child submissions, parent notices)
are also recorded in ``state.outbox`` by key; the runtime sends them after writing the
state and clears them with ``clear_outbox`` (see docs/architecture.md, "Dispatch
protocol"). The rules are described for users in docs/semantics.md.
"""

from __future__ import annotations

import heapq
from collections.abc import Container, Iterable, Mapping, Sequence
from typing import Any

from dagq.core.engine.graph import (
    BAD,
    CANCELLED,
    COMPLETED,
    KIND_CHILD,
    PENDING,
    READY,
    RUNNING,
    STATUS_CLASS,
)
from dagq.core.engine.journal import dumps, loads
from dagq.core.engine.peek import judge
from dagq.core.engine.state import MAX_RETRY_IDS, WorkflowState
from dagq.core.engine.step import Resolve, Step
from dagq.core.engine.types import (
    ChildSubmit,
    Completion,
    Dispatch,
    Effects,
    NotifyEvent,
    OutboxEntry,
    ParentLink,
    ParentNotice,
    TaskView,
    child_workflow_id,
)
from dagq.core.model import OutputRef, WorkflowDef

Reused = tuple[Any, OutputRef | None, str]
"""A result reused by ``seed``: output, output reference, and where it came from."""

__all__ = [
    "ChildSubmit",
    "Completion",
    "Dispatch",
    "Effects",
    "NotifyEvent",
    "OutboxEntry",
    "ParentLink",
    "ParentNotice",
    "Reused",
    "TaskView",
    "WorkflowState",
    "apply",
    "attempt_key",
    "cancel",
    "cancel_unstarted",
    "child_workflow_id",
    "clear_outbox",
    "create",
    "downstream_of",
    "dumps",
    "expire",
    "judge_attempt",
    "loads",
    "outbox_due",
    "resume",
    "retry",
    "seed",
    "start",
    "stopping_keys",
    "suspend",
    "unsuspend",
    "waiting_dispatches",
]


def create(defn: WorkflowDef, workflow_id: str, now: float, *,
           parent: ParentLink | None = None) -> WorkflowState:
    """A new state for running ``defn``: status ``pending``, nothing dispatched yet.

    Raises ``DefinitionError`` for problems the engine cannot run with (duplicate names,
    unknown or self dependencies, impossible integer policies, cycles); the full checks
    live in ``dagq.core.validate``.
    """
    return WorkflowState(defn, workflow_id, now, parent)


def start(state: WorkflowState, now: float) -> Effects:
    """Start a pending workflow: dispatch the tasks without dependencies. Idempotent."""
    step = Step(state, now)
    if state.status != "pending" or state.cancel_requested:
        return step.fx
    state.status = "running"
    step.fx.workflow_status = ("pending", "running")
    step.todo.extend(state.graph.roots)
    if state.tally[COMPLETED]:  # seeded: tasks after the reused results may run too
        g = state.graph
        step.todo.extend(i for i in range(len(state.st)) if state.st[i] == PENDING
                         and state.n_ok[i] >= g.need[i] and g.deps[i])
    step.drain()
    return step.done()


def seed(state: WorkflowState, now: float, results: Mapping[str, Reused]) -> None:
    """Mark tasks of a pending workflow completed with results reused from another run
    (``dagq rerun --from``): ``results`` maps a task to ``(output, output_ref, source)``;
    ``start`` then runs what follows them. Mapped tasks and their instances cannot be
    seeded (they expand when they run) and are left out."""
    if state.status != "pending":
        raise ValueError("only a workflow that has not started can be seeded")
    step = Step(state, now)
    g = state.graph
    for name, (output, ref, source) in results.items():
        i = g.index[name]
        if i in g.maps or i >= g.n_static:
            continue
        state.output[i], state.output_ref[i] = output, ref
        state.note[i] = f"reused: the result of {source}"
        step.finish(i, COMPLETED)


def apply(state: WorkflowState, completions: Sequence[Completion], now: float,
          resolve: Resolve | None = None) -> Effects:
    """Apply a batch of completions in order.

    A completion counts only for the running attempt of its task; others (duplicates,
    stale or unknown attempts, unknown tasks) are listed in ``Effects.ignored``.
    ``resolve`` loads outputs stored outside the state when a condition needs them.
    """
    step = Step(state, now, resolve)
    for c in completions:
        step.complete(c)
    return step.done()


def cancel(state: WorkflowState, now: float, reason: str | None = None) -> Effects:
    """Cancel the workflow. Idempotent; a finished workflow is left as it is.

    Pending and ready tasks become ``cancelled``; running attempts are listed in
    ``Effects.stop`` and end ``cancelled`` when their completion arrives (``completed`` if
    it is a success). A dispatched attempt whose start delay has not elapsed is cancelled
    at once. The workflow becomes ``cancelled`` when nothing runs any more. ``reason``
    is kept with the state and in each cancelled task's error.
    """
    step = Step(state, now)
    if state.is_terminal() or state.cancel_requested:
        return step.fx
    state.cancel_requested = True
    state.cancel_reason = reason
    why = f"cancelled: {reason}" if reason else "cancelled"
    step.fx.state_changed = True
    st, g = state.st, state.graph
    for i in range(len(st)):
        code = st[i]
        if code in (PENDING, READY):
            step.finish(i, CANCELLED, error=why)
        elif code == RUNNING:
            # only a start delay makes an attempt "not started yet": an attempt sent
            # without one may run at once (and its stored time is rounded to the ms)
            delay = state.delay_used[i]
            started = state.dispatched_at[i] or 0.0
            if delay > 0 and started + delay > now and g.kind[i] != KIND_CHILD:
                step.finish(i, CANCELLED, error="cancelled before it started")
            else:
                state.stopping[i] = 1
                state.touch(i)
                step.fx.stop.append((g.names[i], state.attempt[i]))
    state.held.clear()
    state.held_reset = True
    step.todo.clear()
    return step.done()


def suspend(state: WorkflowState, now: float) -> Effects:
    """Suspend a running workflow: no task starts until ``unsuspend``; attempts already
    sent run to their end (their retries too). Idempotent; a no-op once it ended."""
    step = Step(state, now)
    if state.is_terminal() or state.suspended:
        return step.fx
    state.suspended = True
    step.fx.state_changed = True
    return step.done()


def unsuspend(state: WorkflowState, now: float) -> Effects:
    """Let a suspended workflow go on: the tasks that became ready meanwhile are sent
    (within ``max_parallelism``). Idempotent."""
    step = Step(state, now)
    if not state.suspended:
        return step.fx
    state.suspended = False
    step.fx.state_changed = True
    step.fill()
    return step.done()


def downstream_of(state: WorkflowState, names: Iterable[str]) -> list[int]:
    """The tasks ``names`` and every task after them, in index order (``KeyError`` for
    an unknown name)."""
    g = state.graph
    seen = {g.index[n] for n in names}
    todo = list(seen)
    while todo:
        for k in g.children[todo.pop()]:
            if k not in seen:
                seen.add(k)
                todo.append(k)
    return sorted(seen)


def attempt_key(state: WorkflowState, task: str) -> str:
    """The dispatch key (queue message id) of ``task``'s current attempt."""
    i = state.graph.index[task]
    key = f"{state.workflow_id}/{task}/{state.attempt[i]}"
    return f"{key}.{state.releases[i]}" if state.releases[i] else key


def stopping_keys(state: WorkflowState) -> list[str]:
    """Dispatch keys of the attempts a cancel is waiting for (child workflows excluded:
    they end through their own cancel)."""
    g = state.graph
    return [attempt_key(state, g.names[i]) for i in state.running_set
            if state.stopping[i] and g.kind[i] != KIND_CHILD]


def judge_attempt(state: WorkflowState, task: str, attempt: int, key: str) -> str:
    """Whether a delivered attempt may start, by this state: ``"run"`` (it is the current
    attempt), ``"cancelled"`` (current, but a cancel waits for it), ``"ended"`` (it was
    superseded, finished or reset by a retry) or ``"unknown"`` (the state predates it,
    or there is no such task). ``peek.Facts.judge`` answers the same from stored bytes."""
    i = state.graph.index.get(task)
    if i is None:
        return "unknown"
    return judge(state.st[i], state.attempt[i], state.releases[i], bool(state.stopping[i]),
                 attempt, key)


def cancel_unstarted(state: WorkflowState, now: float, started: Container[str]) -> Effects:
    """End ``cancelled`` every attempt a cancel is waiting for whose key is not in
    ``started`` (the keys that workers report executing): its message may still sit in a
    queue, but no worker will run it. The workflow becomes ``cancelled`` when nothing
    is left running."""
    step = Step(state, now)
    if not state.cancel_requested or state.is_terminal():
        return step.fx
    for key in stopping_keys(state):
        if key not in started:
            task = key[len(state.workflow_id) + 1:].rsplit("/", 1)[0]
            step.finish(state.graph.index[task], CANCELLED, error="cancelled before it started")
    return step.done()


def retry(state: WorkflowState, now: float, request_id: str,
          resolve: Resolve | None = None, *, dispatch: bool = True,
          tasks: Sequence[str] = ()) -> Effects:
    """Run again what did not succeed. Idempotent per ``request_id``.

    Failed, upstream-failed and cancelled tasks go back to ``pending`` and are resolved
    again (policy, then condition) as their dependencies allow; each starts a new round
    of ``num_retries + 1`` attempts, numbered after the previous ones. Attempts still
    being stopped by a cancel are let run: a failure of one starts its new round. A
    pending cancel request is withdrawn. With ``dispatch=False`` the reset tasks stay
    ``pending`` until ``resume`` decides them (a client resets, the coordinator runs).

    With ``tasks``, only those tasks and every task after them are reset, whatever
    their status (a completed one runs again): ``ValueError`` if one of them is running
    or is a mapped task that has expanded (retry its instances instead).
    """
    step = Step(state, now, resolve)
    if request_id in state.retry_ids:
        return step.fx
    st = state.st
    chosen: list[int] = []
    if tasks:
        unknown = [t for t in tasks if t not in state.graph.index]
        if unknown:
            raise KeyError(f"no task {unknown[0]!r} in workflow {state.workflow_id}")
        chosen = downstream_of(state, tasks)
        g = state.graph
        for i in chosen:
            if st[i] == RUNNING:
                raise ValueError(f"task {g.names[i]!r} is running; wait for it to end (or "
                                 "cancel the workflow) before running it again")
            if i in state.maps:
                raise ValueError(f"task {g.names[i]!r} is a mapped task that has expanded; "
                                 f"retry its instances ({g.names[i]}[N]) instead")
    state.retry_ids.append(request_id)
    del state.retry_ids[:-MAX_RETRY_IDS]
    if state.status == "pending":
        return step.fx  # never started: nothing to run again
    if state.cancel_requested:
        state.cancel_requested = False
        state.cancel_reason = None
        step.fx.state_changed = True
    for i in state.running_set:
        if state.stopping[i]:
            state.stopping[i] = 0
            state.round_start[i] = state.attempt[i] + 1
            state.touch(i)
    reset = ([i for i in chosen if st[i] != PENDING] if tasks
             else [i for i in range(len(st)) if STATUS_CLASS[st[i]] == BAD])
    for i in reset:
        state.round_start[i] = state.attempt[i] + 1
        state.error[i] = state.note[i] = state.finished_at[i] = None
        state.output[i] = state.output_ref[i] = None
        step.set_status(i, PENDING)
    step.todo.clear()  # a reset task never triggers its children; evaluate resets only
    if dispatch:
        step.todo.extend(reset)
        step.drain()
    return step.done()


def resume(state: WorkflowState, now: float, resolve: Resolve | None = None) -> Effects:
    """Decide every ``pending`` task whose policy is met or impossible (after a retry
    that did not dispatch). Idempotent; a no-op on a workflow that is not running."""
    step = Step(state, now, resolve)
    if state.status != "running":
        return step.fx
    st, g = state.st, state.graph
    step.todo.extend(i for i in range(len(st)) if st[i] == PENDING and (
        state.n_ok[i] >= g.need[i] or state.n_bad[i] > g.slack[i]))
    step.drain()
    return step.done()


def expire(state: WorkflowState, now: float, grace_s: float = 0.0,
           resolve: Resolve | None = None) -> Effects:
    """Fail every running attempt whose deadline plus ``grace_s`` has passed.

    The deadline of an attempt is its dispatch time plus its delay plus the task's
    timeout. A timed-out attempt counts as a failed completion with the error
    ``timed out after Ns`` (so retries apply) and is listed in ``Effects.stop``.
    """
    step = Step(state, now, resolve)
    heap = state.deadlines
    while heap and heap[0][0] + grace_s < now:
        at, i, a = heapq.heappop(heap)
        if state.st[i] != RUNNING or state.attempt[i] != a or state.deadline(i) != at:
            continue  # that attempt already ended or was dispatched again
        timeout = state.graph.timeout[i]
        name = state.graph.names[i]
        step.fx.stop.append((name, a))
        step.complete(Completion(name, a, False, error=f"timed out after {timeout:g}s"))
    return step.done()


def outbox_due(state: WorkflowState, now: float, grace_s: float) -> list[OutboxEntry]:
    """Outbox entries written at least ``grace_s`` seconds before ``now`` (to re-send)."""
    return [e for e in state.outbox.values() if now - e.written_at >= grace_s]


def waiting_dispatches(state: WorkflowState, now: float, after_s: float,
                       queues: Container[str] | None = None) -> list[Dispatch]:
    """The queue messages of running attempts (child workflows excluded; only those of
    ``queues`` if given) that have been visible for at least ``after_s`` seconds by
    ``now`` and whose dispatch is no longer in the outbox: if no worker has started one
    and its queue holds nothing, its message was lost and may be sent again (same key:
    claims make a copy harmless)."""
    g, out = state.graph, []
    for i in sorted(state.running_set):
        at = state.dispatched_at[i]
        if at is None or g.kind[i] == KIND_CHILD or now - at - state.delay_used[i] < after_s:
            continue
        if queues is not None and g.queue[i] not in queues:
            continue
        key = attempt_key(state, g.names[i])
        if key not in state.outbox:
            out.append(Dispatch(key, g.names[i], state.attempt[i], g.queue[i], 0.0,
                                g.timeout[i]))
    return out


def clear_outbox(state: WorkflowState, keys: Iterable[str]) -> None:
    """Forget outbox entries that are known to be sent (unknown keys are ignored)."""
    outbox = state.outbox
    for key in keys:
        outbox.pop(key, None)

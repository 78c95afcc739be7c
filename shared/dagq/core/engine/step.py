"""The engine's transition machinery: one ``Step`` per public engine call.

A step changes task statuses only through ``set_status``, which keeps every aggregate of
the state (status counts, running set, dependents' success/failure counters, sinks)
in sync and records the transition. Dependents whose policy became met or impossible go
on a work list that ``drain`` processes iteratively (no recursion, so long chains are
fine), then freed parallelism slots are refilled. The cost of a step is proportional to
the tasks whose status changes plus their direct children.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import Any

from dagq.core.condition import cached_condition
from dagq.core.engine.graph import (
    BAD,
    CANCELLED,
    COMPLETED,
    FAILED,
    KIND_CHILD,
    KIND_MERGE,
    OK,
    PENDING,
    READY,
    RUNNING,
    SKIPPED,
    STATUS_CLASS,
    STATUS_NAMES,
    UPSTREAM_FAILED,
)
from dagq.core.engine.state import WorkflowState
from dagq.core.engine.types import (
    ChildSubmit,
    Completion,
    Dispatch,
    Effects,
    NotifyEvent,
    OutboxEntry,
    ParentNotice,
    child_workflow_id,
)
from dagq.core.hooks import failure_list, fired, has_hooks
from dagq.core.mapping import MapError, read_items
from dagq.core.model import OutputRef
from dagq.core.policy import retry_delay
from dagq.errors import ConditionError

Resolve = Callable[[OutputRef], Any]


class Step:
    """Mutates one state for one engine call and collects the resulting ``Effects``."""

    __slots__ = ("fx", "g", "now", "resolve", "s", "todo")

    def __init__(self, state: WorkflowState, now: float, resolve: Resolve | None = None) -> None:
        self.s = state
        self.g = state.graph
        self.now = now
        self.resolve = resolve
        self.fx = Effects(names=self.g.names)
        self.todo: deque[int] = deque()

    # -- the one place statuses change -----------------------------------------------------
    def set_status(self, i: int, new: int) -> None:
        """Move task ``i`` to status ``new``, updating every aggregate."""
        s = self.s
        s.dirty.add(i)
        old = s.st[i]
        if old == new:
            return
        s.st[i] = new
        s.tally[old] -= 1
        s.tally[new] += 1
        g = self.g
        self.fx.moves.append(i << 8 | old << 4 | new)
        if i >= g.n_static and s.map_cursor:
            self._map_slot(i, old, new)
        if old == RUNNING:
            del s.running_set[i]
        elif new == RUNNING:
            s.running_set[i] = None
        was, now = STATUS_CLASS[old], STATUS_CLASS[new]
        if was == now:
            return
        if g.sink[i]:
            s.sinks_ok += (now == OK) - (was == OK)
        kids = g.children[i]
        if not kids:
            return
        st, n_ok, n_bad, todo = s.st, s.n_ok, s.n_bad, self.todo
        if was == OK:
            for k in kids:
                n_ok[k] -= 1
        elif was == BAD:
            for k in kids:
                n_bad[k] -= 1
        if now == OK:
            need = g.need
            for k in kids:
                n_ok[k] += 1
                if st[k] == PENDING and n_ok[k] >= need[k]:
                    todo.append(k)
        elif now == BAD:
            slack = g.slack
            for k in kids:
                n_bad[k] += 1
                if st[k] == PENDING and n_bad[k] > slack[k]:
                    todo.append(k)

    def _map_slot(self, i: int, old: int, new: int) -> None:
        """Keep the count of ready and running instances of a map with its own
        ``max_parallelism``; a freed slot goes to its next waiting instance."""
        s, g = self.s, self.g
        h = g.head[i - g.n_static]
        if h not in s.map_cursor:
            return
        was, now = old in (READY, RUNNING), new in (READY, RUNNING)
        if was == now:
            return
        s.map_active[h] += 1 if now else -1
        if now:
            return
        base = g.starts[h]
        end = base + len(s.maps[h])
        for j in range(base + s.map_cursor[h], end):
            if s.st[j] == PENDING and j != i:
                s.map_cursor[h] = j - base + 1
                self.todo.append(j)
                return
        s.map_cursor[h] = end - base

    def drain(self) -> None:
        """Resolve every pending task whose policy became met or impossible."""
        s, g, todo = self.s, self.g, self.todo
        while todo:
            i = todo.popleft()
            if s.st[i] != PENDING:
                continue
            if s.cancel_requested:
                self.finish(i, CANCELLED, error="cancelled")
            elif s.n_ok[i] >= g.need[i]:
                self.policy_met(i)
            elif s.n_bad[i] > g.slack[i]:
                self.finish(i, UPSTREAM_FAILED)
        self.fill()

    def finish(self, i: int, status: int, error: str | None = None) -> None:
        """End task ``i`` in a terminal ``status``."""
        s = self.s
        s.finished_at[i] = self.now
        s.error[i] = error
        s.stopping[i] = 0
        self.set_status(i, status)

    # -- becoming ready ------------------------------------------------------------------
    def policy_met(self, i: int) -> None:
        """Task ``i``'s policy is met: check its condition, then run, complete or skip it
        (a map head expands into its instances instead of running)."""
        s, g = self.s, self.g
        if i >= g.n_static and s.map_cursor:
            h = g.head[i - g.n_static]
            cap = g.maps[h].max_parallelism
            if cap is not None and s.map_active[h] >= cap:
                pos = i - g.starts[h]
                if pos < s.map_cursor[h]:
                    s.map_cursor[h] = pos  # wait for a slot of its map
                return
        expr = g.condition[i]
        if expr is not None:
            ok, note = self.check_condition(i, expr)
            s.note[i] = note
            if note is not None:
                self.fx.notes[g.names[i]] = note
            if not ok:
                self.finish(i, SKIPPED)
                return
        if i in g.maps and i not in s.maps:
            self.expand(i)
            return
        self.set_status(i, READY)
        if g.kind[i] == KIND_MERGE:
            s.attempt[i] += 1
            s.dispatched_at[i] = self.now
            s.output[i] = None
            s.output_ref[i] = None
            self.finish(i, COMPLETED)
        elif g.max_parallelism is None and not s.suspended:
            self.dispatch(i, g.delay[i])
        else:
            s.held.append(i)
            s.held_pushed.append(i)

    def expand(self, h: int) -> None:
        """Map head ``h`` may run: add one instance per item (each decided at once) and
        complete the head, or fail it when its items cannot be read."""
        s, g = self.s, self.g
        spec = g.maps[h]
        try:
            items = read_items(spec, s.inputs_of(g.names[h]), s.definition.params, self.resolve)
        except MapError as exc:
            s.dispatched_at[h] = self.now
            self.finish(h, FAILED, error=str(exc))
            return
        start = s.expand(h, items)
        self.fx.names = g.names
        s.dispatched_at[h] = self.now
        s.note[h] = f"mapped over {len(items):,} item{'' if len(items) == 1 else 's'}"
        if spec.max_parallelism is not None:
            s.map_active[h], s.map_cursor[h] = 0, 0
        self.fx.expanded.append((g.names[h], len(items)))
        self.finish(h, COMPLETED)
        s.error[h] = None
        self.todo.extend(range(start, start + len(items)))
        for k in g.children[start] if items else self._former_children(h):
            if s.st[k] == PENDING and (s.n_ok[k] >= g.need[k] or s.n_bad[k] > g.slack[k]):
                self.todo.append(k)

    def _former_children(self, h: int) -> list[int]:
        """The tasks that depended on map head ``h`` before it expanded into nothing."""
        g = self.g
        return [k for k in range(g.n_static) if h in g.base_deps[k]]

    def check_condition(self, i: int, expr: str) -> tuple[bool, str | None]:
        """Evaluate task ``i``'s condition over its current inputs (never raises)."""
        try:
            cond = cached_condition(expr)
        except ConditionError as exc:
            return False, f"condition could not be compiled: {exc}"
        ok, note = cond.evaluate(self.s.inputs_of(self.g.names[i]), self.resolve)
        if not ok and note is None:
            note = f"condition is false: {expr}"
        return ok, note

    def fill(self) -> None:
        """Dispatch held ready tasks while the parallelism cap leaves room."""
        s = self.s
        cap = self.g.max_parallelism
        if s.suspended or not s.held:
            return
        held, st, delay = s.held, s.st, self.g.delay
        while held and (cap is None or s.tally[RUNNING] < cap):
            i = held.popleft()
            s.held_popped += 1
            if st[i] == READY:
                self.dispatch(i, delay[i])

    # -- dispatching -------------------------------------------------------------------------
    def dispatch(self, i: int, delay: float, *, same_attempt: bool = False) -> None:
        """Send a new attempt of task ``i`` (or the same attempt again after a release)."""
        s, g, now = self.s, self.g, self.now
        if same_attempt:
            s.releases[i] += 1
        else:
            s.attempt[i] += 1
            s.releases[i] = 0
        a = s.attempt[i]
        self.set_status(i, RUNNING)
        s.dispatched_at[i] = now
        s.delay_used[i] = delay
        timeout = g.timeout[i]
        if timeout is not None:
            heapq.heappush(s.deadlines, (now + delay + timeout, i, a))
        name = g.names[i]
        key = f"{s.workflow_id}/{name}/{a}"
        if s.releases[i]:
            key = f"{key}.{s.releases[i]}"
        if g.kind[i] == KIND_CHILD:
            child = ChildSubmit(key, name, a, child_workflow_id(s.workflow_id, name, a), delay)
            self.fx.children.append(child)
            s.outbox[key] = OutboxEntry("child", child, now)
        else:
            d = Dispatch(key, name, a, g.queue[i], delay, timeout)
            self.fx.dispatched.append(d)
            s.outbox[key] = OutboxEntry("dispatch", d, now)

    # -- completions -------------------------------------------------------------------------
    def complete(self, c: Completion) -> None:
        """Apply one completion (or record why it was ignored)."""
        s = self.s
        i = self.g.index.get(c.task)
        if i is None:
            self.fx.ignored.append((c, f"unknown task {c.task!r}"))
            return
        code, a = s.st[i], s.attempt[i]
        if code != RUNNING or c.attempt != a:
            self.fx.ignored.append((c, self._why_ignored(i, c.attempt)))
            return
        if s.stopping[i]:
            if c.success and not c.released:
                self._succeed(i, c)
            else:
                self.finish(i, CANCELLED, error=c.error or "cancelled")
        elif c.released:
            self.dispatch(i, 0.0, same_attempt=True)
        elif c.success:
            self._succeed(i, c)
        else:
            self.fail_attempt(i, c.error or "failed (no error message)")
        self.drain()

    def _succeed(self, i: int, c: Completion) -> None:
        s = self.s
        s.output[i] = c.output
        s.output_ref[i] = c.output_ref
        if c.cached:
            s.note[i] = f"cached: the result of {c.cached}"
        self.finish(i, COMPLETED)

    def fail_attempt(self, i: int, error: str) -> None:
        """The running attempt of task ``i`` failed: retry within budget, else fail."""
        s = self.s
        task = self.g.spec(i)
        used = s.attempt[i] - s.round_start[i] + 1
        if used < task.num_retries + 1:
            s.error[i] = error
            self.dispatch(i, retry_delay(used, task.retry_backoff_s, task.retry_backoff_max_s))
        else:
            self.finish(i, FAILED, error=error)

    def _why_ignored(self, i: int, attempt: int) -> str:
        s = self.s
        code, current = s.st[i], s.attempt[i]
        status = STATUS_NAMES[code]
        if attempt > current:
            return f"attempt {attempt} was never dispatched (latest is {current})"
        if attempt < current:
            return f"stale: attempt {attempt} was superseded by attempt {current}"
        if code in (PENDING, READY):
            return f"stale: attempt {attempt} ended before the workflow was retried"
        return f"duplicate: attempt {attempt} already ended ({status})"

    # -- workflow status ---------------------------------------------------------------------
    def settle(self) -> None:
        """Recompute the workflow status; emit a parent notice on reaching a terminal one."""
        s = self.s
        old = s.status
        if old == "pending" and not s.cancel_requested:
            return
        t = s.tally
        n = len(s.st)
        if s.cancel_requested:
            new = "running" if t[RUNNING] else "cancelled"
        elif t[PENDING] + t[READY] + t[RUNNING]:
            new = "running"
        elif s.definition.result_policy == "all_tasks_succeed":
            new = "completed" if t[COMPLETED] + t[SKIPPED] == n else "failed"
        else:
            new = "completed" if s.sinks_ok == self.g.n_sinks else "failed"
        if new == old:
            return
        s.status = new
        prev = self.fx.workflow_status
        self.fx.workflow_status = (prev[0] if prev else old, new)
        if new in ("completed", "failed", "cancelled") and s.parent is not None:
            self._notify_parent(new)
        if new in ("completed", "failed", "cancelled") and has_hooks(s.definition):
            self._notify_hooks(new)

    def _notify_parent(self, status: str) -> None:
        s = self.s
        assert s.parent is not None
        s.notices_sent += 1
        key = f"{s.workflow_id}/notice-{s.notices_sent}"
        error = None if status == "completed" else self._failure_summary(status)
        notice = ParentNotice(s.parent.workflow_id, s.parent.task, s.parent.attempt,
                              status == "completed", error, key)
        self.fx.notices.append(notice)
        s.outbox[key] = OutboxEntry("notice", notice, self.now)

    def _notify_hooks(self, status: str) -> None:
        """Record the event that fires the run's hooks for ``status`` (if any fire)."""
        s = self.s
        if fired(s.definition, status):
            s.events_sent += 1
            key = f"{s.workflow_id}/event-{s.events_sent}"
            counts = {STATUS_NAMES[code]: n for code, n in enumerate(s.tally) if n}
            failed, total = failure_list(self.g.names, s.st, s.attempt, s.error, FAILED)
            event = NotifyEvent(key, status, s.events_sent, counts, failed, total)
            s.outbox[key] = OutboxEntry("notify", event, self.now)

    def _failure_summary(self, status: str) -> str:
        s = self.s
        if status == "cancelled":
            return f"child workflow {s.workflow_id} was cancelled"
        bad = [name for name, code in zip(self.g.names, s.st, strict=True)
               if code in (FAILED, UPSTREAM_FAILED, CANCELLED)]
        shown = ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        return f"child workflow {s.workflow_id} failed: {shown or 'a sink did not complete'}"

    def done(self) -> Effects:
        """Settle the workflow status, stamp ``updated_at`` if anything changed."""
        self.settle()
        if self.fx.changed():
            self.s.updated_at = self.now
        return self.fx

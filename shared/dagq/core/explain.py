"""Why each task of a run is where it is: a pure reading of a state at a given time.

The engine keeps one status, ``running``, from the moment it decides to dispatch an
attempt until that attempt ends. What a user wants to know is finer, so this module
derives a *phase* for every task:

- ``waiting``: dispatched with a delay (``delay_s``) or a retry back-off that has not
  elapsed yet; the message is not visible to workers before ``until``;
- ``queued``: visible on its queue, no worker has reported it started;
- ``started``: a worker reports the attempt in its heartbeat (``Facts.started``), or the
  task runs a child workflow;
- ``held``: ready, but the workflow's ``max_parallelism`` cap is full; or dispatched but
  not sent because its concurrency key is full (``Facts.slots``);
- for every other status the phase is the status itself.

A mapped task is explained folded (``dagq.core.folding``): its head gets the folded
status and phase, and says how many items it mapped over, its instances per status and
which failed; an instance says which map and item it is, then why it is where it is.
Explaining every task explains the tasks of the definition (each map by its head).

The facts that need I/O (which attempts workers run, which queues have a live worker)
are gathered by the caller and passed in as ``Facts``; nothing here reads a clock.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dagq.core.engine.graph import (
    BAD,
    CANCELLED,
    COMPLETED,
    FAILED,
    KIND_CHILD,
    KIND_MERGE,
    PENDING,
    READY,
    RUNNING,
    SKIPPED,
    STATUS_CLASS,
    STATUS_NAMES,
    UPSTREAM_FAILED,
)
from dagq.core.engine.state import WorkflowState
from dagq.core.engine.types import child_workflow_id
from dagq.core.error_summary import error_summary
from dagq.core.folding import describe, folded_phase, folded_status, instances_with, status_counts
from dagq.core.mapping import item_text
from dagq.core.priority import base_queue

PHASES = ("pending", "held", "waiting", "queued", "started", "completed", "failed",
          "upstream_failed", "skipped", "cancelled")
"""Every phase a task can be in (see the module docstring)."""


@dataclass(frozen=True)
class Facts:
    """What the caller knows beyond the state."""

    now: float
    """The time to explain at (epoch seconds)."""
    started: frozenset[str] = frozenset()
    """Dispatch keys (``wf/task/attempt``) that live workers report running."""
    live_queues: frozenset[str] | None = None
    """Queues with at least one live worker; ``None`` when unknown."""
    outbox_grace_s: float = 30.0
    """Age after which an unconfirmed dispatch counts as stale (``DAGQ_OUTBOX_GRACE``)."""
    slots: Mapping[str, tuple[str, int, Sequence[str]]] = field(default_factory=dict)
    """Dispatch keys waiting for a slot of a full concurrency key: ``(key, limit, the
    dispatch keys holding its slots)`` (``dagq.runtime.slots``)."""


@dataclass(frozen=True)
class Explanation:
    """Why one task is in its status, in sentences, plus the facts behind them."""

    task: str
    status: str
    phase: str
    attempt: int
    queue: str
    reasons: tuple[str, ...]
    until: float | None = None
    """When a waiting task becomes visible to workers (delay or back-off end)."""
    waiting_for: tuple[str, ...] = field(default=())
    """Dependencies that have not finished yet."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"task": self.task, "status": self.status, "phase": self.phase,
                "attempt": self.attempt, "queue": self.queue, "reasons": list(self.reasons),
                "until": self.until, "waiting_for": list(self.waiting_for)}


def dispatch_key(state: WorkflowState, i: int) -> str:
    """The message id of task ``i``'s current attempt (as workers report it)."""
    key = f"{state.workflow_id}/{state.graph.names[i]}/{state.attempt[i]}"
    return f"{key}.{state.releases[i]}" if state.releases[i] else key


def phase_of(state: WorkflowState, i: int, facts: Facts) -> str:
    """The phase of task ``i`` (see the module docstring)."""
    code = state.st[i]
    if code == READY:
        return "held"
    if code != RUNNING:
        return STATUS_NAMES[code]
    if dispatch_key(state, i) in facts.started:
        return "started"
    if facts.slots and dispatch_key(state, i) in facts.slots:
        return "held"
    if facts.now < _visible_at(state, i):
        return "waiting"
    return "started" if state.graph.kind[i] == KIND_CHILD else "queued"


def phases(state: WorkflowState, facts: Facts) -> dict[str, str]:
    """Phase of every task, by name."""
    names = state.graph.names
    return {names[i]: phase_of(state, i, facts) for i in range(len(names))}


def explain(state: WorkflowState, facts: Facts, task: str | None = None) -> list[Explanation]:
    """An explanation for ``task`` (``KeyError`` if unknown) or for every task of the
    definition (a map's instances are summed up by its head)."""
    g = state.graph
    ids = [g.index[task]] if task is not None else range(g.n_static)
    return [_explain_map(state, i, facts) if i in state.maps else _explain(state, i, facts)
            for i in ids]


def _explain_map(s: WorkflowState, h: int, facts: Facts) -> Explanation:
    """Map head ``h`` has expanded: its instances, counted, and which need attention."""
    g = s.graph
    counts = status_counts(s, h)
    status = folded_status(s, h, counts)
    phase = folded_phase(s, h, lambda j: phase_of(s, j, facts), status)
    reasons = [describe(s, h, counts)]
    bad = counts.get("failed", 0)
    if bad:
        shown = instances_with(s, h, "failed")
        more = f" and {bad - len(shown):,} more" if bad > len(shown) else ""
        reasons.append(f"failed instances: {', '.join(shown)}{more} (dagq retry re-runs "
                       "only those; dagq explain ID NAME[K] says why one failed)")
    active = counts.get("running", 0) + counts.get("ready", 0) + counts.get("pending", 0)
    if active:
        reasons.append(f"{active:,} instance(s) still to finish")
    cap = g.maps[h].max_parallelism
    if cap is not None:
        reasons.append(f"at most {cap} instance(s) run at once (map.max_parallelism)")
    return Explanation(g.names[h], status, phase, s.attempt[h], g.queue[h], tuple(reasons))


def _visible_at(state: WorkflowState, i: int) -> float:
    return (state.dispatched_at[i] or 0.0) + state.delay_used[i]


def _when(t: float | None, now: float) -> str:
    if t is None:
        return "at an unknown time"
    delta = t - now
    return f"in {delta:.0f}s" if delta >= 0 else f"{-delta:.0f}s ago"


def _until(t: float, now: float) -> str:
    stamp = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"at {stamp} ({_when(t, now)})"


def _explain(s: WorkflowState, i: int, facts: Facts) -> Explanation:
    g = s.graph
    code = s.st[i]
    phase = phase_of(s, i, facts)
    reasons: list[str] = []
    until: float | None = None
    waiting: tuple[str, ...] = ()
    if code == PENDING:
        waiting, reasons = _pending(s, i)
    elif code == READY:
        cap = g.max_parallelism
        reasons.append(f"ready, held by the workflow's max_parallelism={cap} "
                       f"({s.tally[RUNNING]} task(s) running)")
    elif code == RUNNING:
        until, reasons = _running(s, i, phase, facts)
    else:
        reasons = _terminal(s, i, code, facts.now)
    if i >= g.n_static:
        k = i - g.n_static
        head = g.names[g.head[k]]
        reasons.insert(0, f"instance {g.pos[k]} of map {head!r} (item: "
                          f"{_short(item_text(s.item_of(i)[1]))})")
        cap = g.maps[g.head[k]].max_parallelism
        if code == PENDING and cap is not None:
            reasons.append(f"waits for a slot: at most {cap} instance(s) of {head!r} run "
                           "at once (map.max_parallelism)")
    elif i in g.maps and code == PENDING:
        reasons.append(describe(s, i))
    if code in (PENDING, READY, RUNNING) and s.cancel_requested:
        reasons.append("cancel pending: the workflow was asked to cancel; nothing new starts")
    return Explanation(g.names[i], STATUS_NAMES[code], phase, s.attempt[i], g.queue[i],
                       tuple(reasons), until, waiting)


def _pending(s: WorkflowState, i: int) -> tuple[tuple[str, ...], list[str]]:
    g = s.graph
    deps = g.deps[i]
    open_ = tuple(g.names[d] for d in deps if s.st[d] in (PENDING, READY, RUNNING))
    reasons: list[str] = []
    if s.status == "pending":
        reasons.append("the workflow has not been started by a coordinator yet "
                       "(is one running? dagq coordinator)")
    need = g.need[i]
    policy = g.spec(i).dep_policy
    if open_:
        shown = ", ".join(open_[:10]) + (f" and {len(open_) - 10} more" if len(open_) > 10
                                          else "")
        reasons.append(f"waiting for dependencies: {shown}")
    if policy != "all" or (deps and s.n_ok[i] < need and not open_):
        reasons.append(f"dependency policy {policy!r} needs {need} of {len(deps)} to "
                       f"succeed; {s.n_ok[i]} did, {s.n_bad[i]} did not")
    if g.condition[i] is not None:
        reasons.append(f"condition {g.condition[i]!r} is checked once the policy is met")
    return open_, reasons


def _running(s: WorkflowState, i: int, phase: str,
             facts: Facts) -> tuple[float | None, list[str]]:
    g = s.graph
    a = s.attempt[i]
    reasons: list[str] = []
    until: float | None = None
    if s.stopping[i]:
        reasons.append(f"cancel pending: attempt {a} was asked to stop")
    if g.kind[i] == KIND_CHILD and phase != "waiting":
        child = child_workflow_id(s.workflow_id, g.names[i], a)
        reasons.append(f"runs child workflow {child} (attempt {a}); see dagq explain {child}")
        return None, reasons
    retrying = a > s.round_start[i]
    if phase == "waiting":
        until = _visible_at(s, i)
        if retrying:
            reasons.append(f"retry back-off after attempt {a - 1} failed "
                           f"({_first_line(s.error[i])}): attempt {a} is queued "
                           f"{_until(until, facts.now)}")
        else:
            reasons.append(f"delay_s={g.delay[i]:g}: attempt {a} is queued "
                           f"{_until(until, facts.now)}")
    elif phase == "started":
        reasons.append(f"attempt {a} is running on a worker of queue {g.queue[i]!r}")
    elif phase == "held":  # not sent: a concurrency key is full
        key, limit, holders = facts.slots[dispatch_key(s, i)]
        shown = ", ".join(holders[:3]) + (f" and {len(holders) - 3} more"
                                          if len(holders) > 3 else "")
        reasons.append(f"waiting for key {key}: {len(holders)} of {limit} running"
                       + (f" (held by {shown})" if holders else ""))
        return None, reasons
    else:
        since = _visible_at(s, i)
        reasons.append(f"attempt {a} is queued on {g.queue[i]!r} since "
                       f"{_when(since, facts.now)}; no worker has reported it started")
        if retrying:
            reasons.append(f"previous attempt failed: {_first_line(s.error[i])}")
        if facts.live_queues is not None and base_queue(g.queue[i]) not in facts.live_queues:
            reasons.append(f"queue {g.queue[i]!r} has no live worker "
                           f"(start one: dagq worker {base_queue(g.queue[i])})")
    entry = s.outbox.get(dispatch_key(s, i))
    if entry is not None and facts.now - entry.written_at > facts.outbox_grace_s:
        reasons.append(f"stale outbox: the dispatch decided {_when(entry.written_at, facts.now)}"
                       " is not confirmed sent; the next coordinator to load this workflow "
                       "re-sends it")
    deadline = s.deadline(i)
    if deadline is not None:
        reasons.append(f"times out {_until(deadline, facts.now)}")
    return until, reasons


def _terminal(s: WorkflowState, i: int, code: int, now: float) -> list[str]:
    g = s.graph
    a = s.attempt[i]
    ended = _when(s.finished_at[i], now)
    if code == COMPLETED:
        how = "completed by the engine (merge node)" if g.kind[i] == KIND_MERGE \
            else f"attempt {a} succeeded"
        return [f"{how}, {ended}"]
    if code == FAILED:
        return [f"attempt {a} failed {ended}: {_first_line(s.error[i])}",
                f"no retries left (num_retries={g.spec(i).num_retries})"]
    if code == SKIPPED:
        out = [f"skipped {ended}: {s.note[i] or 'condition was false'}"]
        if g.condition[i] is not None:
            values = ", ".join(f"{k}={_short_json(v)}" for k, v in
                               s.inputs_of(g.names[i]).items())
            out.append(f"condition {g.condition[i]!r} saw inputs: {values or 'none'}")
        return out
    if code == UPSTREAM_FAILED:
        bad = [g.names[d] for d in g.deps[i] if STATUS_CLASS[s.st[d]] == BAD]
        return [f"dependencies did not succeed: {', '.join(bad)}; policy "
                f"{g.spec(i).dep_policy!r} needs {g.need[i]} of {len(g.deps[i])}"]
    if code == CANCELLED:
        return [f"cancelled {ended}" + (f": {s.error[i]}" if s.error[i] not in (None, "cancelled")
                                        else "")]
    return []


def _short_json(value: Any, limit: int = 80) -> str:
    try:
        text = json.dumps(value, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _first_line(text: str | None) -> str:
    """The attempt's error summary (the same line every view shows)."""
    return error_summary(text) or "no error message"


__all__ = ["PHASES", "Explanation", "Facts", "dispatch_key", "explain", "phase_of", "phases"]

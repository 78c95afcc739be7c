"""What the engine state alone cannot say about a run: which attempts workers have
started and which queues have a live worker, read from the workers' heartbeats and
claims.

A worker claims an attempt before it starts it and lists the dispatch keys it runs in
every heartbeat (``dagq.protocol.heartbeats``), so an attempt shows as ``started`` as
soon as a live worker's claim on it is written, and as ``queued`` before. These facts
feed the pure ``dagq.core.explain``.
"""

from __future__ import annotations

from typing import Any

from dagq.core.engine.state import WorkflowState
from dagq.core.explain import Facts, dispatch_key, explain, phases
from dagq.errors import DagqError
from dagq.graph.model import GraphModel, from_state
from dagq.ports import Backend
from dagq.protocol.heartbeats import INTERVAL, held_claims, live_workers
from dagq.protocol.slots import keyed, waiting


def gather_facts(backend: Backend, state: WorkflowState, now: float,
                 outbox_grace_s: float = 30.0) -> Facts:
    """Facts for ``state`` at ``now``; reads heartbeats only if some task is running."""
    if not state.running_set:
        return Facts(now, outbox_grace_s=outbox_grace_s)
    try:
        workers = live_workers(backend.records, now)
    except DagqError:  # without heartbeats, say nothing rather than something wrong
        return Facts(now, outbox_grace_s=outbox_grace_s)
    listed = {str(k) for ws in workers.values() for w in ws for k in _keys(w.get("running"))}
    beats = {str(w["id"]): w for ws in workers.values() for w in ws}
    unlisted = [key for key in (dispatch_key(state, i) for i in state.running_set)
                if key not in listed]
    try:  # a claim newer than its worker's last heartbeat: started, not listed yet
        claimed = held_claims(backend.records, beats, now, INTERVAL, unlisted)
    except DagqError:
        claimed = set()
    return Facts(now, frozenset(listed | claimed), frozenset(workers), outbox_grace_s,
                 _slots(backend, state))


def _slots(backend: Backend, state: WorkflowState) -> dict[str, tuple[str, int, list[str]]]:
    """The attempts of ``state`` waiting for a slot of a concurrency key (one record
    read per key; nothing for a workflow without keys)."""
    if not keyed(state.definition):
        return {}
    try:
        return waiting(backend.records, state)
    except DagqError:
        return {}


def _keys(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def task_phases(backend: Backend, state: WorkflowState, now: float) -> dict[str, str]:
    """The phase of every task (``queued`` vs ``started`` for running ones)."""
    return phases(state, gather_facts(backend, state, now))


def explanations(backend: Backend, state: WorkflowState, now: float, task: str | None = None,
                 outbox_grace_s: float = 30.0) -> list[dict[str, Any]]:
    """JSON-ready explanations of ``task`` or of every task."""
    facts = gather_facts(backend, state, now, outbox_grace_s)
    return [e.to_json() for e in explain(state, facts, task)]


def graph_of(backend: Backend, state: WorkflowState, now: float) -> GraphModel:
    """The graph model of a run, with phases."""
    return from_state(state, task_phases(backend, state, now))

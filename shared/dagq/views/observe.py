"""What the engine state alone cannot say about a run: which attempts workers have
started and which queues have a live worker, read from the workers' heartbeats.

A worker lists the dispatch keys it runs in every heartbeat and writes one as soon as
its set of running tasks changes (at most once a second, see ``worker.runtime``), so an
attempt shows as ``started`` within about a second of a worker taking it and as
``queued`` before. These facts feed the pure ``dagq.core.explain``.
"""

from __future__ import annotations

from typing import Any

from dagq.core.engine.state import WorkflowState
from dagq.core.explain import Facts, explain, phases
from dagq.errors import DagqError
from dagq.graph.model import GraphModel, from_state
from dagq.ports import Backend
from dagq.protocol.heartbeats import live_workers
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
    started = frozenset(str(k) for ws in workers.values() for w in ws
                        for k in _keys(w.get("running")))
    return Facts(now, started, frozenset(workers), outbox_grace_s, _slots(backend, state))


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

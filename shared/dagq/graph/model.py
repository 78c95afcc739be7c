"""The graph model every renderer draws: tasks with their dependencies and, for a run,
their status and phase. It is plain JSON (the HTTP API serves it as is).

A mapped task is one task of the model, however many instances it has: its ``map`` holds
``{"over", "items", "counts"}`` (instances per status; ``items`` None before it
expands) and its status and phase are folded (``dagq.core.folding``)."""

from __future__ import annotations

from typing import Any

from dagq.core.engine.graph import KIND_CHILD, KIND_MERGE, STATUS_NAMES
from dagq.core.engine.state import WorkflowState
from dagq.core.engine.types import child_workflow_id
from dagq.core.folding import folded_phase, folded_status, map_info, status_counts
from dagq.core.mapping import map_spec
from dagq.core.model import WorkflowDef

GraphModel = dict[str, Any]
"""``{"id", "name", "status", "tasks": [{"name", "deps", "queue", "kind", "status",
"phase", "attempt", "child", "map"}]}``; ``id``, ``status`` and ``phase`` are ``None``
for a definition that has not run, ``map`` for a task that is no map."""


def _kind(defn: WorkflowDef, i: int) -> str:
    t = defn.tasks[i]
    return "merge" if t.merge else "child" if t.workflow is not None else "task"


def _definition_map(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        over = map_spec(value).over
    except ValueError:
        over = str(value)
    return {"over": over, "items": None, "counts": {}}


def from_definition(defn: WorkflowDef) -> GraphModel:
    """The graph of a definition (no statuses)."""
    return {"id": None, "name": defn.name, "status": None, "tasks": [
        {"name": t.name, "deps": list(t.depends_on), "queue": defn.queue_of(t),
         "kind": _kind(defn, i), "status": None, "phase": None, "attempt": 0, "child": None,
         "map": _definition_map(t.map)}
        for i, t in enumerate(defn.tasks)]}


def from_state(state: WorkflowState, phases: dict[str, str]) -> GraphModel:
    """The graph of a run, with each task's status, phase and child workflow id (the
    tasks of its definition: each map folded into its head)."""
    g = state.graph
    names = g.names
    tasks = []
    for i in range(g.n_static):
        name = names[i]
        a = state.attempt[i]
        kind = g.kind[i]
        status, phase, info = STATUS_NAMES[state.st[i]], phases.get(name), None
        if i in g.maps:
            counts = status_counts(state, i)
            info = map_info(state, i, counts)
            if i in state.maps:
                status = folded_status(state, i, counts)
                phase = folded_phase(state, i, lambda j: phases.get(names[j], ""), status)
        tasks.append({
            "name": name, "deps": [names[d] for d in g.base_deps[i]], "queue": g.queue[i],
            "kind": "merge" if kind == KIND_MERGE else "child" if kind == KIND_CHILD
            else "task",
            "status": status, "phase": phase, "attempt": a,
            "child": child_workflow_id(state.workflow_id, name, a)
            if kind == KIND_CHILD and a else None, "map": info})
    return {"id": state.workflow_id, "name": state.definition.name, "status": state.status,
            "tasks": tasks}

"""The graph model every renderer draws: tasks with their dependencies and, for a run,
their status and phase. It is plain JSON (the HTTP API serves it as is)."""

from __future__ import annotations

from typing import Any

from dagq.core.engine.graph import KIND_CHILD, KIND_MERGE, STATUS_NAMES
from dagq.core.engine.state import WorkflowState
from dagq.core.engine.types import child_workflow_id
from dagq.core.model import WorkflowDef

GraphModel = dict[str, Any]
"""``{"id", "name", "status", "tasks": [{"name", "deps", "queue", "kind", "status",
"phase", "attempt", "child"}]}``; ``id``, ``status`` and ``phase`` are ``None`` for a
definition that has not run."""


def _kind(defn: WorkflowDef, i: int) -> str:
    t = defn.tasks[i]
    return "merge" if t.merge else "child" if t.workflow is not None else "task"


def from_definition(defn: WorkflowDef) -> GraphModel:
    """The graph of a definition (no statuses)."""
    return {"id": None, "name": defn.name, "status": None, "tasks": [
        {"name": t.name, "deps": list(t.depends_on), "queue": defn.queue_of(t),
         "kind": _kind(defn, i), "status": None, "phase": None, "attempt": 0, "child": None}
        for i, t in enumerate(defn.tasks)]}


def from_state(state: WorkflowState, phases: dict[str, str]) -> GraphModel:
    """The graph of a run, with each task's status, phase and child workflow id."""
    g = state.graph
    tasks = []
    for i, name in enumerate(g.names):
        a = state.attempt[i]
        kind = g.kind[i]
        tasks.append({
            "name": name, "deps": [g.names[d] for d in g.deps[i]], "queue": g.queue[i],
            "kind": "merge" if kind == KIND_MERGE else "child" if kind == KIND_CHILD
            else "task",
            "status": STATUS_NAMES[state.st[i]], "phase": phases.get(name), "attempt": a,
            "child": child_workflow_id(state.workflow_id, name, a)
            if kind == KIND_CHILD and a else None})
    return {"id": state.workflow_id, "name": state.definition.name, "status": state.status,
            "tasks": tasks}

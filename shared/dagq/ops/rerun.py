"""``dagq rerun ID [--from TASK]``: run a finished workflow again as a new run.

Without ``--from`` the same definition (parameters included) is submitted again and the
cache decides what runs: tasks that use it and whose inputs did not change are taken
from it. With ``--from TASK``, that task and every task after it run again (the cache is
not consulted for them, and their results replace its entries), and every other task
that completed keeps its result: the new run starts with those tasks completed
(``engine.seed``), their outputs read from the earlier run, so nothing before ``TASK``
runs again whether or not it uses the cache. Mapped tasks before ``TASK`` run again
(their instances are made when they run).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

from dagq.core import engine
from dagq.core.caching import refreshed
from dagq.core.engine.graph import COMPLETED
from dagq.core.engine.state import WorkflowState
from dagq.core.model import WorkflowDef
from dagq.errors import DagqError, TaskNotFound
from dagq.protocol.http import Submitted


class NotFinished(DagqError):
    """Raised when a workflow to run again has not finished yet."""


class Submitter(Protocol):
    """What ``rerun`` needs of a client (``dagq.client.WorkflowClient``)."""

    def state(self, workflow_id: str) -> WorkflowState:
        """The stored state of a workflow."""
        ...

    def submit(self, defn: WorkflowDef, *, workflow_id: str | None = None,
               reuse: Mapping[str, engine.Reused] | None = None) -> Submitted:
        """Validate, store and start a workflow."""
        ...


def downstream(defn: WorkflowDef, task: str) -> set[str]:
    """``task`` and every task that depends on it, directly or not."""
    kids: dict[str, list[str]] = {}
    for t in defn.tasks:
        for d in t.depends_on:
            kids.setdefault(d, []).append(t.name)
    out = {task}
    todo = deque([task])
    while todo:
        for k in kids.get(todo.popleft(), ()):
            if k not in out:
                out.add(k)
                todo.append(k)
    return out


def _settled(value: bool | Mapping[str, Any] | None) -> bool | Mapping[str, Any] | None:
    """A task's ``cache`` without the ``refresh`` an earlier ``--from`` gave it."""
    if isinstance(value, Mapping) and "refresh" in value:
        return {k: v for k, v in value.items() if k != "refresh"} or True
    return value


def rerun(client: Submitter, workflow_id: str, *, from_task: str | None = None,
          new_id: str | None = None) -> Submitted:
    """Submit a new run of finished workflow ``workflow_id`` (see the module docstring)."""
    state = client.state(workflow_id)
    if not state.is_terminal():
        raise NotFinished(f"workflow {workflow_id} is {state.status}; wait for it to end "
                          "(or cancel it) before running it again")
    defn = replace(state.definition, tasks=tuple(
        replace(t, cache=_settled(t.cache)) for t in state.definition.tasks))
    if from_task is None:  # a stored definition's tasks are decoded lazily: a tuple again
        return client.submit(replace(defn, tasks=tuple(defn.tasks)), workflow_id=new_id)
    g = state.graph
    if from_task not in g.index or g.index[from_task] >= g.n_static:
        raise TaskNotFound(f"workflow {workflow_id} has no task {from_task!r}; --from names "
                           "a task of its definition")
    again = downstream(defn, from_task)
    tasks = tuple(replace(t, cache=refreshed(t.cache, defn.cache)) if t.name in again else t
                  for t in defn.tasks)
    reuse: dict[str, engine.Reused] = {}
    for i in range(g.n_static):
        name = g.names[i]
        if name not in again and state.st[i] == COMPLETED and i not in g.maps:
            reuse[name] = (state.output[i], state.output_ref[i],
                           f"{workflow_id}/{name}/{state.attempt[i]}")
    return client.submit(replace(defn, tasks=tasks), workflow_id=new_id, reuse=reuse)

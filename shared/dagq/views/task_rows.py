"""A workflow's tasks as view rows, chosen on the state's columns.

``dagq status``, ``dagq tasks`` and ``GET /workflows/{id}/tasks`` show a page of a
workflow's tasks. Filtering, ordering and counting work on the state's columns, and rows
(with their attempt history) are built only for the page, so a page of a million-task
workflow costs one pass over the columns rather than a million rows.

A mapped task is folded (``dagq.core.folding``): its head's row carries ``map`` (items
and instances per status) and the folded status, and its instances are left out unless
``expand`` is given or the name prefix reaches into them (``fit[`` lists the instances of
``fit``); expanded, each head's instances follow it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dagq.core import engine
from dagq.core.engine.graph import KIND_CHILD, READY, RUNNING, STATUS_CODES, STATUS_NAMES
from dagq.core.engine.state import WorkflowState
from dagq.core.explain import Facts, phase_of
from dagq.core.folding import (
    describe,
    folded_finished_at,
    folded_phase,
    folded_status,
    head_of,
    instances,
    map_info,
    status_counts,
    workflow_counts,
)
from dagq.ports import Records
from dagq.protocol import attempts
from dagq.views.task_details import enrich

ATTENTION = ("failed", "upstream_failed", "cancelled", "running", "ready", "pending",
             "skipped", "completed")
"""The order in which a view that cannot show every task shows them."""
_RANK = [ATTENTION.index(name) for name in STATUS_NAMES]


@dataclass(frozen=True)
class TaskPage:
    """One page of a workflow's tasks and the counts over all of them."""

    rows: list[dict[str, Any]]
    """The page's tasks as ``dagq tasks --json`` rows."""
    total: int
    """How many tasks matched the filters (the page is a slice of them)."""
    counts: dict[str, int] = field(default_factory=dict)
    """Tasks per status as views show it (queued and waiting apart from running)."""
    phases: dict[str, int] = field(default_factory=dict)
    """Tasks per phase (``held``, ``queued``, ``waiting``, ``started`` and the statuses)."""


def select(state: WorkflowState, *, prefix: str | None = None, status: str | None = None,
           queue: str | None = None, expand: bool = False) -> list[int]:
    """Indices of the tasks matching the filters, in definition order (an expanded
    map's instances right after their head). A map head matches ``status`` by its
    folded status; its instances are listed with ``expand``, or when ``prefix`` matches
    them and not the head (``fit[`` or ``fit[1``)."""
    g, st = state.graph, state.st
    ids: list[int] | range = _ordered(state, expand, prefix)
    if status is not None:
        code = STATUS_CODES[status]
        if code == RUNNING and not state.maps:
            ids = sorted(state.running_set)
        else:
            ids = [i for i in ids if (st[i] == code if i not in state.maps
                                      else folded_status(state, i) == status)]
    if queue is not None:
        ids = [i for i in ids if g.queue[i] == queue]
    if prefix:
        names = g.names
        ids = [i for i in ids if names[i].startswith(prefix)]
    return list(ids)


def _ordered(state: WorkflowState, expand: bool, prefix: str | None) -> list[int] | range:
    """Every task in definition order, an expanded map's instances after their head
    when they are listed (``select``)."""
    g = state.graph
    if not state.maps:
        return range(len(state.st))
    out: list[int] = []
    names = g.names
    for i in range(g.n_static):
        out.append(i)
        if i in state.maps and (expand or (prefix and not names[i].startswith(prefix))):
            out.extend(instances(state, i))
    return out


def attention_order(state: WorkflowState, ids: list[int]) -> list[int]:
    """``ids`` with failed and running tasks first (``ATTENTION``), otherwise in order."""
    st = state.st
    if not state.maps:
        return sorted(ids, key=lambda i: _RANK[st[i]])
    return sorted(ids, key=lambda i: _RANK[st[i]] if i not in state.maps
                  else ATTENTION.index(folded_status(state, i)))


def counts(state: WorkflowState, facts: Facts) -> tuple[dict[str, int], dict[str, int]]:
    """Tasks per shown status and tasks per phase, over every task of ``state`` (each
    instance of a map counted, its expanded head not)."""
    shown: dict[str, int] = {}
    phases: dict[str, int] = {}
    for code, n in enumerate(workflow_counts(state) if state.maps else state.tally):
        if n and code != RUNNING:
            shown[STATUS_NAMES[code]] = n
            phase = "held" if code == READY else STATUS_NAMES[code]
            phases[phase] = phases.get(phase, 0) + n
    for i in state.running_set:
        phase = phase_of(state, i, facts)
        phases[phase] = phases.get(phase, 0) + 1
        key = phase if phase in ("queued", "waiting") else "running"
        shown[key] = shown.get(key, 0) + 1
    return shown, phases


def rows(records: Records, state: WorkflowState, ids: list[int],
         facts: Facts) -> list[dict[str, Any]]:
    """``dagq tasks --json`` rows of tasks ``ids`` (attempt history included: read per
    task for a small page of a large workflow, else in one listing)."""
    wf, g = state.workflow_id, state.graph
    whole = len(ids) * 20 >= len(state.st)
    history = attempts.list_attempts(records, wf) if whole else {}
    out = []
    for i in ids:
        view = state.task_view(g.names[i])
        past = history.get(view.name, []) if whole else attempts.list_attempts(
            records, wf, view.name).get(view.name, [])
        row = enrich({**summary(view), "phase": phase_of(state, i, facts)}, state, past)
        if g.kind[i] == KIND_CHILD and view.attempt:
            row["child"] = engine.child_workflow_id(wf, view.name, view.attempt)
        if i in g.maps:
            fold(row, state, i, facts)
        elif i >= g.n_static:
            row["map_of"] = g.names[head_of(state, i)]
        out.append(row)
    return out


def fold(row: dict[str, Any], state: WorkflowState, i: int, facts: Facts) -> None:
    """Make ``row`` of map head ``i`` its folded row: ``map`` (over, items, counts), the
    folded status and phase, and when its last instance ended."""
    tally = status_counts(state, i)
    row["map"] = map_info(state, i, tally)
    if i not in state.maps:
        return
    row["note"] = describe(state, i, tally)
    status = folded_status(state, i, tally)
    row["status"] = status
    row["phase"] = folded_phase(state, i, lambda j: phase_of(state, j, facts), status)
    row["finished_at"] = folded_finished_at(state, i, status)


def summary(view: Any) -> dict[str, Any]:
    """A JSON-ready summary of one task view."""
    return {
        "name": view.name, "status": view.status, "queue": view.queue,
        "attempt": view.attempt, "error": view.error, "note": view.note,
        "dispatched_at": view.dispatched_at, "finished_at": view.finished_at,
        "due_at": view.due_at,
        "has_output": view.output is not None or view.output_ref is not None,
    }

"""A mapped task as views show it: its instances folded into one row, box or explanation.

A map head (a task with ``map: {over: ...}``) that has expanded is ``completed`` in the
engine, with one task per item after it (``NAME[0]``, ``NAME[1]``, ...). Views show the
head instead of its instances, with their count per status and one *folded status*:

- before the head expands (or if it never does: skipped, failed to read its items,
  upstream failed, cancelled), its own status;
- a map of no items: ``completed``;
- otherwise the first of ``running``, ``ready``, ``pending``, ``failed``,
  ``upstream_failed``, ``cancelled``, ``completed``, ``skipped`` that some instance has:
  a map is running while any instance runs, and failed once one failed and none is
  still to run.

The folded phase follows (``started`` before ``queued`` before ``waiting`` among running
instances, ``held`` for ``ready``). Counts over a workflow count each instance and leave
out each expanded head, which is no work of its own. Pure: reads the state only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dagq.core.engine.graph import STATUS_CODES, STATUS_NAMES
from dagq.core.engine.state import WorkflowState

ORDER = ("running", "ready", "pending", "failed", "upstream_failed", "cancelled",
         "completed", "skipped")
"""Which instance status decides a map's folded status, first match wins."""
_RUNNING_PHASES = ("started", "queued", "waiting")
SYMBOLS = {"completed": "✓", "failed": "✗", "running": "▶", "ready": "⏸", "pending": "…",
           "upstream_failed": "⊘", "cancelled": "■", "skipped": "↷"}
"""The mark of each status in a map's label (``fit ×1000 (998 ✓ 2 ✗)``)."""
_LABEL_ORDER = ("completed", "failed", "running", "ready", "pending", "upstream_failed",
                "cancelled", "skipped")


def is_head(state: WorkflowState, i: int) -> bool:
    """True for a task with a ``map`` (expanded or not)."""
    return i in state.graph.maps


def expanded(state: WorkflowState, i: int) -> bool:
    """True for a map head that has expanded into its instances (maybe none)."""
    return i in state.maps


def instances(state: WorkflowState, h: int) -> range:
    """The indices of map head ``h``'s instances (empty before it expands)."""
    items = state.maps.get(h)
    if items is None:
        return range(0)
    start = state.graph.starts.get(h, len(state.st))
    return range(start, start + len(items))


def head_of(state: WorkflowState, i: int) -> int:
    """The map head of instance ``i``; -1 for a task of the definition."""
    g = state.graph
    return g.head[i - g.n_static] if i >= g.n_static else -1


def status_counts(state: WorkflowState, h: int) -> dict[str, int]:
    """Map head ``h``'s instances per status (statuses with none left out)."""
    ids = instances(state, h)
    if not ids:
        return {}
    chunk = bytes(state.st[ids.start:ids.stop])
    out = {}
    for name in _LABEL_ORDER:
        n = chunk.count(STATUS_CODES[name])
        if n:
            out[name] = n
    return out


def folded_status(state: WorkflowState, i: int,
                  counts: dict[str, int] | None = None) -> str:
    """The status views show for task ``i`` (see the module docstring); a task that is
    no expanded map head shows its own."""
    if i not in state.maps:
        return STATUS_NAMES[state.st[i]]
    counts = status_counts(state, i) if counts is None else counts
    if not counts:
        return "completed"
    return next(s for s in ORDER if counts.get(s))


def folded_phase(state: WorkflowState, i: int, phase: Callable[[int], str],
                 status: str | None = None) -> str:
    """The phase views show for task ``i``; ``phase`` gives one task's own phase."""
    if i not in state.maps:
        return phase(i)
    status = folded_status(state, i) if status is None else status
    if status == "ready":
        return "held"
    if status != "running":
        return status
    ids = instances(state, i)
    seen = {phase(j) for j in state.running_set if j in ids}
    return next((p for p in _RUNNING_PHASES if p in seen), "queued")


def folded_finished_at(state: WorkflowState, i: int, status: str) -> float | None:
    """When the last instance of map head ``i`` ended (None while one may still run)."""
    if status in ("running", "ready", "pending"):
        return None
    ids = instances(state, i)
    ends = [t for t in state.finished_at[ids.start:ids.stop] if t is not None]
    return max(ends, default=state.finished_at[i])


def map_info(state: WorkflowState, i: int,
             counts: dict[str, int] | None = None) -> dict[str, Any]:
    """``{"over", "items", "counts"}`` of map head ``i``: ``items`` is None until it
    expands; ``counts`` is its instances per status."""
    spec = state.graph.maps[i]
    items = state.maps.get(i)
    return {"over": spec.over, "items": None if items is None else len(items),
            "counts": status_counts(state, i) if counts is None else counts}


def label(name: str, info: dict[str, Any] | None) -> str:
    """A map's label: ``fit ×1000 (998 ✓ 2 ✗)``, ``fit ×?`` before it expands; ``name``
    for a task that is no map."""
    if info is None:
        return name
    if info.get("items") is None:
        return f"{name} ×?"
    counts = info.get("counts") or {}
    marks = " ".join(f"{counts[s]} {SYMBOLS[s]}" for s in _LABEL_ORDER if counts.get(s))
    return f"{name} ×{info['items']}" + (f" ({marks})" if marks else "")


def instances_with(state: WorkflowState, h: int, status: str, limit: int = 10) -> list[str]:
    """The names of the first ``limit`` instances of map head ``h`` with ``status``."""
    ids = instances(state, h)
    chunk = bytes(state.st[ids.start:ids.stop])
    code = STATUS_CODES[status]
    out: list[str] = []
    at = chunk.find(code)
    names = state.graph.names
    while at >= 0 and len(out) < limit:
        out.append(names[ids.start + at])
        at = chunk.find(code, at + 1)
    return out


def describe(state: WorkflowState, h: int, counts: dict[str, int] | None = None) -> str:
    """One line about map head ``h``: ``mapped over 1,000 items of inputs.scan.files:
    998 completed, 2 failed (fit[3], fit[7])``."""
    spec = state.graph.maps[h]
    items = state.maps.get(h)
    if items is None:
        return f"maps over {spec.over} (one instance per item, once it may run)"
    counts = status_counts(state, h) if counts is None else counts
    n = len(items)
    text = f"mapped over {n:,} item{'' if n == 1 else 's'} of {spec.over}"
    parts = []
    for s in _LABEL_ORDER:
        n = counts.get(s, 0)
        if n and s == "failed":
            shown = instances_with(state, h, "failed", 5)
            parts.append(f"{n:,} failed ({', '.join(shown)}{', ...' if n > len(shown) else ''})")
        elif n:
            parts.append(f"{n:,} {s}")
    return text + (": " + ", ".join(parts) if parts else "")


def workflow_counts(state: WorkflowState) -> list[int]:
    """Tasks per status code, each instance counted and each expanded head left out."""
    tally = list(state.tally)
    for h in state.maps:
        tally[state.st[h]] -= 1
    return tally


__all__ = ["ORDER", "SYMBOLS", "describe", "expanded", "folded_finished_at", "folded_phase",
           "folded_status", "head_of", "instances", "instances_with", "is_head", "label",
           "map_info", "status_counts", "workflow_counts"]

"""What a task listing says beyond the state: attempt history, why a task did not run,
and the one error line worth showing in a table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dagq.core.engine.state import WorkflowState
from dagq.core.error_summary import error_summary

_BAD = ("failed", "upstream_failed", "cancelled")
ACTIVE = ("pending", "ready", "running")
"""Task statuses of a task that may still print."""


def reason(state: WorkflowState, name: str, status: str, note: str | None) -> str | None:
    """Why ``name`` ended without running: the dependencies that failed it, or the
    condition that skipped it; None for other statuses."""
    if status == "skipped":
        return note or "its condition was false"
    if status != "upstream_failed":
        return None
    g = state.graph
    bad = []
    for d in g.deps[g.index[name]]:
        st = state.task_view(g.names[d]).status
        if st in _BAD:
            bad.append(f"{g.names[d]} ({st})")
    if not bad:
        return "its dependency policy can no longer be met"
    return "upstream failed: " + ", ".join(bad)


def enrich(summary: dict[str, Any], state: WorkflowState,
           history: list[dict[str, Any]]) -> dict[str, Any]:
    """``summary`` (one task of ``dagq tasks --json``) with ``error_line`` (the
    attempt's error summary, ``dagq.core.error_summary``), ``reason`` and ``attempts``
    added."""
    summary["error_line"] = error_summary(summary.get("error"))
    summary["reason"] = reason(state, summary["name"], summary["status"], summary.get("note"))
    summary["attempts"] = history
    return summary


@dataclass(frozen=True)
class LogRead:
    """A piece of one attempt's stored log."""

    attempt: int
    """The attempt read."""
    data: bytes
    """Bytes from the requested offset."""
    next_offset: int
    """Where to continue reading."""
    finished: bool
    """True when the attempt can print nothing more (read once more to get the rest)."""


def attempt_finished(state: WorkflowState, task: str, attempt: int) -> bool:
    """True once ``attempt`` of ``task`` has ended (a later attempt or a final status)."""
    view = state.task_view(task)
    return view.attempt != attempt or view.status not in ACTIVE

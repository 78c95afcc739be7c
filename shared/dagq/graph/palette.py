"""Colours of task phases and statuses, shared by every picture (SVG, DOT, Mermaid, web)."""

from __future__ import annotations

FILL: dict[str, str] = {
    "completed": "#2e7d32", "started": "#0277bd", "running": "#0277bd",
    "queued": "#4fc3f7", "waiting": "#9575cd", "held": "#b0bec5", "ready": "#b0bec5",
    "pending": "#e0e0e0", "failed": "#c62828", "upstream_failed": "#ad1457",
    "skipped": "#f9a825", "cancelled": "#616161", "task": "#ffffff",
}
"""Fill colour per phase (or status); ``task`` for a definition that has not run."""

DARK = frozenset({"completed", "started", "running", "waiting", "failed", "upstream_failed",
                  "cancelled"})
"""Fills dark enough for white text."""


def fill(key: str | None) -> str:
    """The fill colour of a phase or status (``None``: not run)."""
    return FILL.get(key or "task", FILL["task"])


def ink(key: str | None) -> str:
    """The text colour that reads on ``fill(key)``."""
    return "#ffffff" if key in DARK else "#212121"

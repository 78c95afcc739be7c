"""One entry point for every picture format."""

from __future__ import annotations

from dagq.graph import svg, text
from dagq.graph.layout import DEFAULT_MAX_WIDTH, layout
from dagq.graph.model import GraphModel

FORMATS = ("mermaid", "dot", "svg")
MEDIA_TYPES = {"mermaid": "text/plain", "dot": "text/vnd.graphviz", "svg": "image/svg+xml"}


TEXT_ALL_UP_TO = 1000
"""Text formats draw every task of a graph up to this size, and fold wider ones like SVG
does (a picture of 100,000 nodes is read by nobody and takes minutes to render)."""


def render(model: GraphModel, fmt: str, max_width: int | None = None) -> str:
    """``model`` drawn in ``fmt``; layers wider than ``max_width`` are folded (by default
    SVG folds at ``DEFAULT_MAX_WIDTH``; text formats keep every task of a graph of up to
    ``TEXT_ALL_UP_TO`` tasks and fold larger ones the same way)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown picture format {fmt!r}; use one of {', '.join(FORMATS)}")
    small = len(model["tasks"]) <= TEXT_ALL_UP_TO
    width = max_width or (1 << 30 if fmt != "svg" and small else DEFAULT_MAX_WIDTH)
    lay = layout(model, width)
    title = str(model.get("id") or model["name"])
    if fmt == "mermaid":
        return text.mermaid(lay)
    if fmt == "dot":
        return text.dot(lay, title)
    return svg.render(lay, title)

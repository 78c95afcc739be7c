"""One entry point for every picture format."""

from __future__ import annotations

from dagq.graph import svg, text
from dagq.graph.layout import DEFAULT_MAX_WIDTH, layout
from dagq.graph.model import GraphModel

FORMATS = ("mermaid", "dot", "svg")
MEDIA_TYPES = {"mermaid": "text/plain", "dot": "text/vnd.graphviz", "svg": "image/svg+xml"}


def render(model: GraphModel, fmt: str, max_width: int | None = None) -> str:
    """``model`` drawn in ``fmt``; layers wider than ``max_width`` are folded (SVG folds at
    ``DEFAULT_MAX_WIDTH`` unless told otherwise, text formats keep every task)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown picture format {fmt!r}; use one of {', '.join(FORMATS)}")
    width = max_width or (DEFAULT_MAX_WIDTH if fmt == "svg" else 1 << 30)
    lay = layout(model, width)
    title = str(model.get("id") or model["name"])
    if fmt == "mermaid":
        return text.mermaid(lay)
    if fmt == "dot":
        return text.dot(lay, title)
    return svg.render(lay, title)

"""SVG of a laid-out graph, drawn left to right, one column per layer.

Made by this code alone (no Graphviz). Every box is a ``<g>`` with ``data-task``,
``data-status`` and ``data-phase`` (groups: ``data-group`` and ``data-members``; a mapped
task: ``data-map``, its number of items, empty before it expands), so the web status
page can attach clicks and tests can read what was drawn. A mapped task is drawn as a
stack of boxes.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from dagq.graph.layout import Layout, Node
from dagq.graph.palette import fill, ink

W, H = 180, 28
"""Box size."""
GAP_X, GAP_Y, MARGIN = 70, 10, 16
MAX_CHARS = 24


def _short(text: str, limit: int = MAX_CHARS) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _group_text(node: Node) -> str:
    parts = [f"{v} {k}" for k, v in sorted(node.counts.items(), key=lambda kv: -kv[1])]
    return ", ".join(parts)


def _height(node: Node) -> int:
    return H + 4 + 14 * min(len(node.counts), 3) if node.is_group else H


def render(lay: Layout, title: str = "workflow") -> str:
    """The SVG document of ``lay``."""
    where: dict[str, tuple[int, int]] = {}
    bottom = MARGIN + H
    for d, layer in enumerate(lay.layers):
        y = MARGIN
        for node in layer:
            where[node.id] = (MARGIN + d * (W + GAP_X), y)
            y += _height(node) + GAP_Y
        bottom = max(bottom, y - GAP_Y)
    width = 2 * MARGIN + max(len(lay.layers), 1) * (W + GAP_X) - GAP_X
    total_h = bottom + MARGIN
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{total_h}" '
           f'viewBox="0 0 {width} {total_h}" font-family="sans-serif" font-size="12" '
           f'class="dagq-graph">',
           f"<title>{escape(title)}</title>",
           '<g class="edges" fill="none" stroke="#9e9e9e" stroke-width="1">']
    for a, b in lay.edges:
        (x1, y1), (x2, y2) = where[a], where[b]
        sx, sy, ex, ey = x1 + W, y1 + H // 2, x2, y2 + H // 2
        mid = (sx + ex) / 2
        out.append(f'<path d="M{sx},{sy} C{mid:.0f},{sy} {mid:.0f},{ey} {ex},{ey}"/>')
    out.append("</g>")
    for layer in lay.layers:
        for node in layer:
            out.append(_box(node, *where[node.id]))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _box(node: Node, x: int, y: int) -> str:
    if node.is_group:
        return _group_box(node, x, y)
    key = node.phase or node.status
    attrs = (f'class="node" data-task={quoteattr(node.id)} '
             f'data-status={quoteattr(node.status or "")} '
             f'data-phase={quoteattr(node.phase or "")}')
    if node.child:
        attrs += f" data-child={quoteattr(node.child)}"
    stack = ""
    if node.map is not None:
        items = node.map.get("items")
        attrs += f" data-map={quoteattr('' if items is None else str(items))}"
        stack = (f'<rect x="4" y="-4" width="{W}" height="{H}" rx="5" fill="{fill(key)}" '
                 'stroke="#424242" opacity="0.6"/>')
    full = f"{node.label}: {key}" if key else node.label
    return (f'<g {attrs} transform="translate({x},{y})">'
            f"<title>{escape(full)}</title>{stack}"
            f'<rect width="{W}" height="{H}" rx="5" fill="{fill(key)}" stroke="#424242"/>'
            f'<text x="8" y="{H // 2 + 4}" fill="{ink(key)}">{escape(_short(node.label))}</text>'
            "</g>")


def _group_box(node: Node, x: int, y: int) -> str:
    """A dashed box: ``+N more`` and up to three lines of counts, each with its colour."""
    attrs = (f'class="node group" data-group={quoteattr(node.id)} '
             f'data-members={quoteattr(" ".join(node.members))}')
    top = sorted(node.counts.items(), key=lambda kv: -kv[1])
    rows = [(k, f"{v} {k}") for k, v in top[:3]]
    if len(top) > 3:
        rows[-1] = ("task", f"{sum(v for _, v in top[2:])} other")
    lines = []
    for n, (key, line) in enumerate(rows, start=1):
        base = H // 2 + 4 + 14 * n
        lines.append(f'<rect x="8" y="{base - 9}" width="10" height="10" fill="{fill(key)}" '
                     f'stroke="#616161"/><text x="24" y="{base}" fill="#212121">'
                     f"{escape(line)}</text>")
    return (f'<g {attrs} transform="translate({x},{y})">'
            f"<title>{escape(node.label + ': ' + _group_text(node))}</title>"
            f'<rect width="{W}" height="{_height(node)}" rx="5" fill="#eceff1" '
            f'stroke="#424242" stroke-dasharray="4 2"/>'
            f'<text x="8" y="{H // 2 + 4}" fill="#212121" font-weight="bold">'
            f"{escape(node.label)}</text>{''.join(lines)}</g>")

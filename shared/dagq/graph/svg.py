"""SVG of a laid-out graph, drawn left to right, one column per layer.

Made by this code alone (no Graphviz). Every box is a ``<g>`` with ``data-task``,
``data-status`` and ``data-phase`` (groups: ``data-group`` and ``data-members``; a mapped
task: ``data-map``, its number of items, empty before it expands), so the web status
page can attach clicks and tests can read what was drawn. A mapped task is drawn as a
stack of boxes. A long name wraps onto up to three lines (the box grows), at a smaller
size if it needs more; only a name too long for that is cut, and every box's ``<title>``
(its tooltip) holds the whole name.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from dagq.graph.layout import Layout, Node
from dagq.graph.palette import fill, ink

W, H = 180, 28
"""Box size."""
GAP_X, GAP_Y, MARGIN = 70, 10, 16
MAX_CHARS = 24
"""Characters of a name per line at the normal font size (12)."""
MAX_LINES = 3
"""Lines of a name before it is drawn smaller (then cut)."""
SMALL_FONT, SMALL_CHARS = 10, 29
"""The font size of a name too long for ``MAX_LINES`` lines, and its characters per line."""
BREAK_AFTER = frozenset(" /-_.:,[(")
"""Where a name is best broken: after a separator."""


def wrap(text: str, limit: int = MAX_CHARS) -> list[str]:
    """``text`` in lines of at most ``limit`` characters, broken after a separator when
    one is in the second half of a line; joined again they give ``text`` back."""
    lines: list[str] = []
    while len(text) > limit:
        cut = next((k + 1 for k in range(limit - 1, limit // 2 - 1, -1)
                    if text[k] in BREAK_AFTER), limit)
        lines.append(text[:cut])
        text = text[cut:]
    return [*lines, text] if text or not lines else lines


def label_lines(text: str) -> tuple[list[str], int]:
    """The lines a box shows of ``text`` and their font size: up to ``MAX_LINES`` at 12,
    else at ``SMALL_FONT``, the last line cut with ``…`` only if even that is too few."""
    lines = wrap(text)
    if len(lines) <= MAX_LINES:
        return lines, 12
    lines = wrap(text, SMALL_CHARS)
    if len(lines) > MAX_LINES:
        lines = [*lines[:MAX_LINES - 1], lines[MAX_LINES - 1][:SMALL_CHARS - 1] + "…"]
    return lines, SMALL_FONT


def _line_h(font: int) -> int:
    return font + 2


def _group_text(node: Node) -> str:
    parts = [f"{v} {k}" for k, v in sorted(node.counts.items(), key=lambda kv: -kv[1])]
    return ", ".join(parts)


def _height(node: Node) -> int:
    if node.is_group:
        return H + 4 + 14 * min(len(node.counts), 3)
    lines, font = label_lines(node.label)
    return H + _line_h(font) * (len(lines) - 1)


def render(lay: Layout, title: str = "workflow") -> str:
    """The SVG document of ``lay``."""
    where: dict[str, tuple[int, int]] = {}
    mid: dict[str, int] = {}  # where edges meet a box: halfway down a task's box
    bottom = MARGIN + H
    for d, layer in enumerate(lay.layers):
        y = MARGIN
        for node in layer:
            where[node.id] = (MARGIN + d * (W + GAP_X), y)
            mid[node.id] = y + (H if node.is_group else _height(node)) // 2
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
        sx, sy, ex, ey = where[a][0] + W, mid[a], where[b][0], mid[b]
        cx = (sx + ex) / 2
        out.append(f'<path d="M{sx},{sy} C{cx:.0f},{sy} {cx:.0f},{ey} {ex},{ey}"/>')
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
    h = _height(node)
    lines, font = label_lines(node.label)
    stack = ""
    if node.map is not None:
        items = node.map.get("items")
        attrs += f" data-map={quoteattr('' if items is None else str(items))}"
        stack = (f'<rect x="4" y="-4" width="{W}" height="{h}" rx="5" fill="{fill(key)}" '
                 'stroke="#424242" opacity="0.6"/>')
    full = f"{node.label}: {key}" if key else node.label
    size = "" if font == 12 else f' font-size="{font}"'
    spans = "".join(f'<tspan x="8" dy="{0 if k == 0 else _line_h(font)}">{escape(line)}</tspan>'
                    for k, line in enumerate(lines))
    return (f'<g {attrs} transform="translate({x},{y})">'
            f"<title>{escape(full)}</title>{stack}"
            f'<rect width="{W}" height="{h}" rx="5" fill="{fill(key)}" stroke="#424242"/>'
            f'<text x="8" y="{H // 2 + 4}" fill="{ink(key)}"{size}>{spans}</text>'
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

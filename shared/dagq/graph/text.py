"""Mermaid and Graphviz DOT text of a laid-out graph (statuses as colours)."""

from __future__ import annotations

import re

from dagq.graph.layout import Layout, Node
from dagq.graph.palette import fill, ink

_SAFE_CLASS = re.compile(r"[^a-z_]")


def _key(node: Node) -> str | None:
    return node.phase or node.status


def _label(node: Node) -> str:
    if node.is_group:
        parts = [f"{k} {v}" for k, v in sorted(node.counts.items()) if k != "task"]
        return node.label + (f" ({', '.join(parts)})" if parts else "")
    key = _key(node)
    if node.map is not None and node.map.get("items") is not None:
        return node.label  # its counts say it (its status gives its colour)
    return f"{node.label} ({key})" if key else node.label


def _mermaid_text(text: str) -> str:
    # Mermaid labels in "..." take numeric entity codes for characters that end them
    # (https://mermaid.js.org/syntax/flowchart.html#entity-codes-to-escape-characters)
    return "".join(f"#{ord(c)};" if c in '&"<>#' else c for c in text)


def mermaid(lay: Layout, direction: str = "TD") -> str:
    """A Mermaid ``flowchart`` (paste into Markdown inside a ```mermaid block)."""
    ids: dict[str, str] = {}
    lines = [f"flowchart {direction}"]
    used: set[str] = set()
    for layer in lay.layers:
        for node in layer:
            nid = ids[node.id] = f"n{len(ids)}"
            lines.append(f'    {nid}["{_mermaid_text(_label(node))}"]')
            key = _key(node)
            if key:
                cls = _SAFE_CLASS.sub("_", key)
                lines.append(f"    class {nid} {cls}")
                used.add(key)
    lines += [f"    {ids[a]} --> {ids[b]}" for a, b in lay.edges]
    for key in sorted(used):
        lines.append(f"    classDef {_SAFE_CLASS.sub('_', key)} "
                     f"fill:{fill(key)},color:{ink(key)},stroke:#424242")
    return "\n".join(lines) + "\n"


def _dot_text(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def dot(lay: Layout, name: str = "workflow") -> str:
    """Graphviz DOT (``dot -Tpng``); one node per task, filled by status."""
    lines = [f"digraph {_dot_text(name)} {{", "  rankdir=LR;",
             '  node [shape=box, style="rounded,filled", fontname="sans-serif"];']
    for layer in lay.layers:
        for node in layer:
            key = _key(node)
            attrs = [f"label={_dot_text(_label(node))}", f'fillcolor="{fill(key)}"',
                     f'fontcolor="{ink(key)}"']
            if node.is_group:
                attrs.append('shape=folder')
            lines.append(f"  {_dot_text(node.id)} [{', '.join(attrs)}];")
    lines += [f"  {_dot_text(a)} -> {_dot_text(b)};" for a, b in lay.edges]
    lines.append("}")
    return "\n".join(lines) + "\n"

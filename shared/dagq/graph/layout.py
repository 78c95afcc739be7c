"""Layered layout of a graph model, with wide layers collapsed into groups.

Every task goes in the layer one past its deepest dependency (roots in layer 0). Within
a layer, tasks are ordered by the mean position of their dependencies (one barycentre
pass), which keeps edges short for the fan-out/fan-in shapes workflows have. A layer with
more than ``max_width`` tasks keeps ``max_width - 1`` of them — the ones most worth
seeing (failed, running, queued, ... before completed), in that order — and folds
the rest into one group node, drawn first, that carries their count per status. Edges to or from
folded tasks attach to the group, once. A mapped task is one node, labelled with its
width and its instances per status (``fit ×1000 (998 ✓ 2 ✗)``, ``dagq.core.folding``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from dagq.core.folding import label as map_label
from dagq.graph.model import GraphModel

DEFAULT_MAX_WIDTH = 25

_INTEREST = {"failed": 0, "upstream_failed": 1, "started": 2, "running": 2, "queued": 3,
             "waiting": 4, "held": 5, "ready": 5, "cancelled": 6, "pending": 7, "skipped": 8,
             "completed": 9}


@dataclass
class Node:
    """One box: a task, or a group of folded tasks (``members``)."""

    id: str
    """The task name, or ``group:LAYER`` for a group."""
    layer: int
    label: str
    status: str | None = None
    phase: str | None = None
    members: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    """For a group: folded tasks per phase (or status)."""
    child: str | None = None
    map: dict[str, object] | None = None
    """For a mapped task: ``{"over", "items", "counts"}`` (its instances per status)."""

    @property
    def is_group(self) -> bool:
        """True for a group of folded tasks."""
        return bool(self.members)


@dataclass
class Layout:
    """Layers of nodes (in drawing order) and the edges between node ids."""

    layers: list[list[Node]]
    edges: list[tuple[str, str]]
    folded: int = 0
    """How many tasks are folded into groups."""


def layers_of(model: GraphModel) -> list[int]:
    """The layer of every task (in model order); the model must be acyclic."""
    tasks = model["tasks"]
    index = {t["name"]: i for i, t in enumerate(tasks)}
    depth = [-1] * len(tasks)
    for start in range(len(tasks)):
        if depth[start] >= 0:
            continue
        stack = [start]
        while stack:  # iterative DFS: long chains need no recursion
            i = stack[-1]
            pending = [index[d] for d in tasks[i]["deps"] if depth[index[d]] < 0]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            depth[i] = 1 + max((depth[index[d]] for d in tasks[i]["deps"]), default=-1)
    return depth


def layout(model: GraphModel, max_width: int = DEFAULT_MAX_WIDTH) -> Layout:
    """Lay ``model`` out in layers, folding layers wider than ``max_width``."""
    tasks = model["tasks"]
    depth = layers_of(model)
    n_layers = max(depth, default=-1) + 1
    rows: list[list[int]] = [[] for _ in range(n_layers)]
    for i, d in enumerate(depth):
        rows[d].append(i)
    pos: dict[int, float] = {}
    index = {t["name"]: i for i, t in enumerate(tasks)}
    for row in rows:
        def centre(i: int) -> float:
            deps = [pos[index[d]] for d in tasks[i]["deps"]]
            return sum(deps) / len(deps) if deps else float(i)
        row.sort(key=centre)
        for k, i in enumerate(row):
            pos[i] = float(k)
    owner: dict[str, str] = {}
    out_layers: list[list[Node]] = []
    folded = 0
    for d, row in enumerate(rows):
        keep, fold = row, []
        if len(row) > max_width:
            ranked = sorted(row, key=lambda i: (_INTEREST.get(_shown(tasks[i]) or "", 7), pos[i]))
            keep = ranked[:max_width - 1]  # the most interesting first, in view
            fold = sorted(ranked[max_width - 1:], key=lambda i: pos[i])
        nodes = [Node(tasks[i]["name"], d, map_label(tasks[i]["name"], tasks[i].get("map")),
                      tasks[i]["status"], tasks[i]["phase"], child=tasks[i].get("child"),
                      map=tasks[i].get("map")) for i in keep]
        for node in nodes:
            owner[node.id] = node.id
        if fold:
            folded += len(fold)
            gid = f"group:{d}"
            counts = Counter(_shown(tasks[i]) or "task" for i in fold)
            nodes.insert(0, Node(gid, d, f"+{len(fold)} more", members=[tasks[i]["name"]
                                                                         for i in fold],
                                 counts=dict(counts)))  # first: the summary stays in view
            for i in fold:
                owner[tasks[i]["name"]] = gid
        out_layers.append(nodes)
    seen: set[tuple[str, str]] = set()
    edges: list[tuple[str, str]] = []
    for t in tasks:
        for dep in t["deps"]:
            edge = (owner[dep], owner[t["name"]])
            if edge not in seen:
                seen.add(edge)
                edges.append(edge)
    return Layout(out_layers, edges, folded)


def _shown(task: dict[str, object]) -> str | None:
    value = task.get("phase") or task.get("status")
    return str(value) if value is not None else None

"""Import cycles between siblings, counting imports made only for type checking.

The import contracts leave ``if TYPE_CHECKING:`` imports out (they cost nothing at run
time), which also hides a cycle written that way: two modules that need each other's
names are one concept whatever the annotation trick. This check counts them. The root
package's own ``__init__`` is left out: it names the public surface for the type
checker and loads it lazily, importing nothing at run time.

Usage: ``python -m tests.package.hidden_cycles`` (exit 1 and one line per ring), with
``PYTHONPATH`` pointing at the folder that holds the ``dagq`` package to check.
"""

from __future__ import annotations

import sys
from collections import defaultdict

import grimp

PACKAGE = "dagq"


def sibling_cycles(package: str = PACKAGE) -> list[list[str]]:
    """Each group of siblings that import each other in a ring (a strongly connected
    component of more than one), sorted."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=False)
    parents = {m for m in graph.modules if graph.find_children(m)}
    cycles: list[list[str]] = []
    for parent in sorted(parents):
        edges: dict[str, set[str]] = defaultdict(set)
        prefix = parent + "."
        for module in graph.find_descendants(parent):
            if module == PACKAGE:
                continue
            source = _child(prefix, module)
            for imported in graph.find_modules_directly_imported_by(module):
                if imported.startswith(prefix) and (target := _child(prefix, imported)) != source:
                    edges[source].add(target)
        cycles.extend(sorted(c) for c in _components(edges) if len(c) > 1)
    return cycles


def _child(prefix: str, module: str) -> str:
    return prefix + module[len(prefix):].split(".")[0]


def _components(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of ``edges`` (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            found.append(component)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def main() -> int:
    """Print every cycle; 1 if there is one."""
    cycles = sibling_cycles()
    for cycle in cycles:
        print("cycle between: " + ", ".join(cycle))
    if not cycles:
        print("no import cycle between siblings, TYPE_CHECKING imports included")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())

"""Pictures of workflows: a graph model (from a definition or a run), a layered layout
with wide layers collapsed, and Mermaid, Graphviz DOT and SVG renderings of it."""

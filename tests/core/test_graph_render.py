"""Graph model, layout with folded layers, and the Mermaid, DOT and SVG texts."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from dagq.core import engine
from dagq.core.model import TaskDef, WorkflowDef
from dagq.graph import svg, text
from dagq.graph.layout import layout
from dagq.graph.model import from_definition, from_state


def diamond() -> WorkflowDef:
    return WorkflowDef("d", (TaskDef("a"), TaskDef("b", depends_on=("a",)),
                             TaskDef('c "quoted"', depends_on=("a",)),
                             TaskDef("d", depends_on=("b", 'c "quoted"'))))


def mermaid_edges(src: str) -> set[tuple[str, str]]:
    labels = dict(re.findall(r'^\s+(n\d+)\["(.*)"\]$', src, re.M))
    return {(labels[a], labels[b]) for a, b in re.findall(r"^\s+(n\d+) --> (n\d+)$", src, re.M)}


def test_mermaid_has_exactly_the_edges_and_escapes_labels() -> None:
    src = text.mermaid(layout(from_definition(diamond())))
    assert mermaid_edges(src) == {("a", "b"), ("a", "c #34;quoted#34;"), ("b", "d"),
                                  ("c #34;quoted#34;", "d")}


def test_wide_layers_fold_into_one_group_keeping_the_interesting_tasks() -> None:
    tasks = [TaskDef("root")] + [TaskDef(f"t{i}", depends_on=("root",)) for i in range(100)]
    s = engine.create(WorkflowDef("w", tuple(tasks)), "wf", 0.0)
    engine.start(s, 0.0)
    engine.apply(s, [engine.Completion("root", 1, True)], 1.0)
    engine.apply(s, [engine.Completion(f"t{i}", 1, True) for i in range(100) if i != 57], 2.0)
    engine.apply(s, [engine.Completion("t57", 1, False, error="x")], 3.0)
    lay = layout(from_state(s, {}), max_width=10)
    wide = lay.layers[1]
    assert len(wide) == 10 and lay.folded == 91
    assert "t57" in [n.id for n in wide]  # the failed one is kept
    assert wide[0].is_group and wide[0].counts == {"completed": 91}
    assert ("root", "group:1") in lay.edges and len(lay.edges) == 10


def test_svg_is_well_formed_with_status_data_and_colours() -> None:
    s = engine.create(diamond(), "wf", 0.0)
    engine.start(s, 0.0)
    doc = svg.render(layout(from_state(s, {"a": "queued"})), "wf")
    root = ET.fromstring(doc)
    nodes = {g.get("data-task"): g for g in root.iter("{http://www.w3.org/2000/svg}g")
             if g.get("data-task")}
    assert set(nodes) == {"a", "b", 'c "quoted"', "d"}
    assert nodes["a"].get("data-phase") == "queued"
    rect = nodes["a"].find("{http://www.w3.org/2000/svg}rect")
    assert rect is not None and rect.get("fill") == "#4fc3f7"


def test_dot_names_every_edge() -> None:
    src = text.dot(layout(from_definition(diamond())))
    assert src.count(" -> ") == 4 and '"c \\"quoted\\"" -> "d"' in src


def test_text_pictures_of_large_graphs_fold_wide_layers_by_default() -> None:
    from dagq.graph.render import TEXT_ALL_UP_TO, render

    def fan(n: int) -> WorkflowDef:
        return WorkflowDef("f", (TaskDef("root"), *(TaskDef(f"t{i}", depends_on=("root",))
                                                   for i in range(n))))

    small = render(from_definition(fan(TEXT_ALL_UP_TO - 1)), "mermaid")
    assert len(mermaid_edges(small)) == TEXT_ALL_UP_TO - 1  # every task drawn
    large = render(from_definition(fan(5 * TEXT_ALL_UP_TO)), "mermaid")
    assert len(large) < len(small)  # folded into a group box
    assert len(render(from_definition(fan(5 * TEXT_ALL_UP_TO)), "dot", 10 ** 6)) > len(small)


def test_long_names_wrap_in_taller_boxes_and_keep_the_whole_name_as_tooltip() -> None:
    long = "extract-customer-features-from-the-warehouse"
    huge = "etl/" + "x" * 120
    defn = WorkflowDef("long", (TaskDef("a"), TaskDef(long, depends_on=("a",)),
                                TaskDef(huge, depends_on=("a",))))
    root = ET.fromstring(svg.render(layout(from_definition(defn)), "long"))
    ns = "{http://www.w3.org/2000/svg}"
    boxes = {g.get("data-task"): g for g in root.iter(f"{ns}g") if g.get("data-task")}

    def lines(name: str) -> list[str]:
        return [t.text or "" for t in boxes[name].iter(f"{ns}tspan")]

    def height(name: str) -> int:
        rect = boxes[name].find(f"{ns}rect")
        assert rect is not None
        return int(rect.get("height") or 0)

    assert lines("a") == ["a"] and height("a") == svg.H
    assert lines(long) == ["extract-customer-", "features-from-the-", "warehouse"]
    assert "".join(lines(long)) == long and height(long) > svg.H  # nothing cut
    assert all(len(line) <= svg.MAX_CHARS for line in lines(long))
    shown = lines(huge)  # too long even at the smaller size: cut, the tooltip has it all
    assert len(shown) == svg.MAX_LINES and shown[-1].endswith("…")
    assert boxes[huge].find(f"{ns}text").get("font-size") == str(svg.SMALL_FONT)  # type: ignore[union-attr]
    title = boxes[huge].find(f"{ns}title")
    assert title is not None and (title.text or "").startswith(huge)
    assert svg.wrap("fit ×120 (117 ✓ 2 ✗ 1 ▶)") == ["fit ×120 (117 ✓ 2 ✗ 1 ▶)"]

"""docs/architecture.md's module map is the package tree, its layer map is the layers
contract, and every module says what it is."""

from __future__ import annotations

import importlib
import re

from tests.package.module_map import (
    CAPTIONS,
    DOC,
    LAYERS_BEGIN,
    LAYERS_END,
    PACKAGE,
    current,
    layer_map,
    layers,
    module_map,
    summary,
)


def test_the_documented_map_matches_the_tree() -> None:
    assert current() == module_map(), (
        "docs/architecture.md's module map is out of date; run "
        ".venv/bin/python -m tests.package.module_map --write")


def test_every_module_has_a_docstring_and_none_is_over_400_lines() -> None:
    too_long, undocumented = [], []
    for path in PACKAGE.rglob("*.py"):
        if len(path.read_text().splitlines()) > 400:
            too_long.append(str(path.relative_to(PACKAGE)))
        if not summary(path):
            undocumented.append(str(path.relative_to(PACKAGE)))
    assert not too_long, f"modules over 400 lines: {too_long}"
    assert not undocumented, f"modules without a docstring: {undocumented}"


def test_the_documented_layers_are_the_enforced_ones() -> None:
    missing = [layer for layer in layers() if layer not in CAPTIONS]
    assert not missing, f"give these layers a caption in tests/package/module_map.py: {missing}"
    assert current(LAYERS_BEGIN, LAYERS_END) == layer_map(), (
        "docs/architecture.md's layer map is out of date; run "
        ".venv/bin/python -m tests.package.module_map --write")


def _walk_names() -> list[str]:
    text = DOC.read_text()
    start = text.index("## The walk of one completion")
    section = text[start:text.index("\n## ", start + 1)]
    return sorted(set(re.findall(r"`(dagq(?:\.\w+)+)`", section)))


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def test_every_name_in_the_walk_of_a_completion_exists() -> None:
    names = _walk_names()
    assert len(names) >= 10, f"the walk names too little code: {names}"
    missing = [name for name in names if not _resolves(name)]
    assert not missing, f"docs/architecture.md's walk of one completion names code that " \
                        f"is gone: {missing}"

"""docs/architecture.md's module map is the package tree, and every module says what it is."""

from __future__ import annotations

from tests.package.module_map import PACKAGE, current, module_map, summary


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

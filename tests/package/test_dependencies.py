"""Every third-party module the package imports is a declared dependency."""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imported_top_levels() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "shared" / "dagq").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"dagq", "__future__"}


def test_every_third_party_import_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {d.split(">=")[0].split("[")[0].strip().lower()
                for d in [*project["dependencies"], *project["optional-dependencies"]["azure"],
                          *project["optional-dependencies"].get("metrics", [])]}
    dists = packages_distributions()
    missing = {}
    for module in sorted(_imported_top_levels()):
        owners = {d.lower() for d in dists.get(module, [module])}
        if not owners & declared:
            missing[module] = sorted(owners)
    assert missing == {}, f"imported but not declared in pyproject.toml: {missing}"

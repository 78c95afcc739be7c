"""The layering contract (pyproject.toml, [tool.importlinter]) holds, and it would catch a
violation: a copy of the package with one forbidden import breaks it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(pythonpath: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([str(LINT), "--config", str(ROOT / "pyproject.toml"),
                           "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_package_keeps_its_layers() -> None:
    result = lint(ROOT / "shared", ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


@pytest.mark.parametrize(("module", "line", "contract"), [
    ("core/model.py", "import os", "the core is pure"),
    ("core/validate.py", "from dagq.client import WorkflowClient", "the core is pure"),
    ("backends/sqlite/queue.py", "import dagq.worker.runtime", "backends see only"),
    ("runtime/dispatch.py", "from dagq.client import WorkflowClient", "does not use the"),
    ("compose/steps.py", "import dagq.compose.builder", "no import cycles"),
])
def test_a_deliberate_violation_breaks_the_build(tmp_path: Path, module: str, line: str,
                                                 contract: str) -> None:
    copy = tmp_path / "dagq"
    shutil.copytree(ROOT / "shared" / "dagq", copy,
                    ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / module
    target.write_text(target.read_text() + f"\n{line}  # deliberate violation\n")
    result = lint(tmp_path, tmp_path)
    assert result.returncode != 0, result.stdout
    broken = [ln for ln in result.stdout.splitlines() if ln.endswith("BROKEN")]
    assert broken, result.stdout
    assert contract in result.stdout.split("Broken contracts")[-1], result.stdout

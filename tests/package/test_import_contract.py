"""The import contracts (pyproject.toml, [tool.importlinter]) hold, and each would catch a
violation: a copy of the package with one forbidden import breaks it. A cycle written
behind ``if TYPE_CHECKING:`` is caught too (``tests.package.hidden_cycles``)."""

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


def copy_package(tmp_path: Path) -> Path:
    """A copy of the package under ``tmp_path`` (to break on purpose)."""
    copy = tmp_path / "dagq"
    shutil.copytree(ROOT / "shared" / "dagq", copy,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_the_package_keeps_its_layers() -> None:
    result = lint(ROOT / "shared", ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


LAYERS = "layers: surfaces > client > runtime"
VIOLATIONS = [
    # the imports that once slipped through the blocklists
    ("core/rules.py", "import dagq.imports", LAYERS),
    ("backends/sqlite/queue.py", "import dagq.remote.errors", LAYERS),
    ("remote/client.py", "import dagq.functions.http_io", "the remote client speaks HTTP only"),
    ("remote/client.py", "import dagq.functions.http_io", LAYERS),
    ("worker/runtime.py", "import dagq.graph.render", "workers and the coordinator draw"),
    # each contract, once more
    ("core/model.py", "import os", "the core is pure"),
    ("core/validate.py", "from dagq.client import WorkflowClient", LAYERS),
    ("backends/sqlite/queue.py", "import dagq.worker.runtime", LAYERS),
    ("backends/azure/table.py", "import dagq.protocol.messages", "backends see the protocol"),
    ("runtime/dispatch.py", "from dagq.client import WorkflowClient", LAYERS),
    ("protocol/names.py", "import dagq.backends.registry", LAYERS),
    ("views/task_rows.py", "import dagq.worker.heartbeat", "never reach into the worker"),
    ("client.py", "import dagq.worker.runtime", "never reach into the worker"),
    ("remote/client.py", "import dagq.runtime.control", "the remote client speaks HTTP only"),
    ("functions/http_io.py", "import dagq.remote.errors", LAYERS),
    ("runtime/dispatch.py", "import dagq.views.observe", "workers and the coordinator draw"),
    ("compose/steps.py", "import dagq.compose.builder", "no import cycles"),
    ("runtime/dispatch.py", "import dagq.runtime.coordinator", "no import cycles"),
]


@pytest.mark.parametrize(("module", "line", "contract"), VIOLATIONS)
def test_a_deliberate_violation_breaks_the_build(tmp_path: Path, module: str, line: str,
                                                 contract: str) -> None:
    target = copy_package(tmp_path) / module
    target.write_text(target.read_text() + f"\n{line}  # deliberate violation\n")
    result = lint(tmp_path, tmp_path)
    assert result.returncode != 0, result.stdout
    broken = [ln for ln in result.stdout.splitlines() if ln.endswith("BROKEN")]
    assert broken, result.stdout
    assert contract in result.stdout.split("Broken contracts")[-1], result.stdout


def test_a_module_without_a_layer_breaks_the_build(tmp_path: Path) -> None:
    (copy_package(tmp_path) / "newroom.py").write_text('"""Placed nowhere."""\n')
    result = lint(tmp_path, tmp_path)
    assert result.returncode != 0, result.stdout
    assert "newroom" in result.stdout.split("Broken contracts")[-1], result.stdout


def hidden_cycles(pythonpath: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{pythonpath}{os.pathsep}{ROOT}"}
    return subprocess.run([sys.executable, "-m", "tests.package.hidden_cycles"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)


def test_no_cycle_hides_behind_a_type_checking_import() -> None:
    result = hidden_cycles(ROOT / "shared")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_cycle_behind_a_type_checking_import_is_found(tmp_path: Path) -> None:
    target = copy_package(tmp_path) / "runtime" / "dispatch.py"
    target.write_text(target.read_text() + "\nfrom typing import TYPE_CHECKING\n\n"
                      "if TYPE_CHECKING:\n    from dagq.runtime.coordinator import Coordinator\n")
    result = hidden_cycles(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "dagq.runtime.coordinator" in result.stdout and "dagq.runtime.dispatch" in result.stdout

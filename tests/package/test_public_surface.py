"""The public surface of ``dagq``: exactly these names, each importable and documented."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dagq

REPO = Path(__file__).resolve().parents[2]

PUBLIC = {
    "__version__",
    "Chain", "Group", "WithDelay", "Workflow", "task", "workflow_factory", "load_file",
    "WorkflowDef", "TaskDef",
    "Client", "WorkflowClient", "Submitted", "Settings", "open_backend", "backend_from_settings",
    "DagqError", "ConfigError", "DefinitionError", "Problem", "ConditionError", "CronError",
    "WorkflowNotFound", "IdConflict", "TaskError", "StoreError", "StoreUnavailable",
}


def test_all_is_pinned() -> None:
    assert set(dagq.__all__) == PUBLIC


def test_every_public_name_resolves_and_has_a_docstring() -> None:
    for name in dagq.__all__:
        value = getattr(dagq, name)
        if name != "__version__":
            assert (value.__doc__ or "").strip(), f"dagq.{name} has no docstring"


def test_unknown_names_raise_attribute_error() -> None:
    try:
        dagq.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("dagq.no_such_name resolved")


def test_import_is_cheap_and_works_from_any_directory(tmp_path: Path) -> None:
    code = ("import sys, dagq, dagq.task, dagq.compose; "
            "heavy = [m for m in ('azure', 'click', 'rich', 'dagq.client') if m in sys.modules]; "
            "print(dagq.__file__, heavy)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith(str(REPO / "shared" / "dagq")), out
    assert out.strip().endswith("[]"), f"import dagq pulled in heavy modules: {out}"


def test_the_repository_folder_shared_is_not_a_package_outside_the_repository(
        tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-c", "import shared"], cwd=tmp_path,
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "No module named 'shared'" in result.stderr


def test_all_and_the_lazy_table_agree() -> None:
    assert set(dagq.__all__) - {"__version__"} == set(dagq._EXPORTS)

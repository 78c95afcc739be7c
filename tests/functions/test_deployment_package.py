"""The published deployment, as the Functions host gets it: a fresh virtual environment
built from requirements.txt alone, and only the files .funcignore lets through. It must
import ``function_app`` and index every function the in-process tests index."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.functions.test_bindings import ALWAYS, SERVICEBUS, STORAGE, indexed

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

INDEX = """
import json, function_app
fns = function_app.app.get_functions()
print(json.dumps({f.get_function_name(): json.loads(f.get_function_json()) for f in fns}))
"""


def ignore_patterns() -> list[str]:
    """The patterns of .funcignore (gitignore syntax, as the publishing tools read it)."""
    lines = (ROOT / ".funcignore").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def is_ignored(rel: str, patterns: list[str]) -> bool:
    """True when ``rel`` (a POSIX path below the app root) or one of its folders matches."""
    parts = rel.split("/")
    for pattern in patterns:
        anchored = pattern.strip("/")
        for i in range(len(parts)):
            if fnmatch.fnmatchcase(parts[i], anchored) or \
                    fnmatch.fnmatchcase("/".join(parts[: i + 1]), anchored):
                return True
    return False


def published_files() -> list[str]:
    """Tracked and untracked-but-not-ignored files that a publish would upload."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    patterns = ignore_patterns()
    return [p for p in out.splitlines() if (ROOT / p).is_file() and not is_ignored(p, patterns)]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(app root, python of a venv holding only requirements.txt)."""
    base = tmp_path_factory.mktemp("deploy")
    app = base / "wwwroot"
    for rel in published_files():
        target = app / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)
    env_dir = base / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    result = subprocess.run([str(python), "-m", "pip", "install", "--quiet",
                             "-r", str(app / "requirements.txt")],
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        pytest.fail(f"pip install -r requirements.txt failed:\n{result.stdout}{result.stderr}")
    return app, python


def test_only_the_app_is_published() -> None:
    files = published_files()
    tops = {f.split("/")[0] for f in files}
    assert tops == {"function_app.py", "host.json", "requirements.txt", "shared"}
    assert any(f.startswith("shared/dagq/") for f in files)
    assert not any("/tests/" in f or f.startswith("tests/") for f in files)


@pytest.mark.parametrize("settings", [SERVICEBUS, STORAGE], ids=["servicebus", "storage"])
def test_fresh_environment_imports_and_indexes_every_function(
        deployment: tuple[Path, Path], settings: dict[str, str]) -> None:
    app, python = deployment
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DAGQ_"))}
    env.update(settings)
    result = subprocess.run([str(python), "-c", INDEX], cwd=app, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    deployed = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(deployed) >= ALWAYS
    assert deployed == indexed(settings)


def test_the_fresh_environment_cannot_see_the_development_tree(
        deployment: tuple[Path, Path]) -> None:
    _, python = deployment
    probe = "import importlib.util as u; print(u.find_spec('dagq'), u.find_spec('pytest'))"
    out = subprocess.run([str(python), "-c", probe], cwd="/", capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["None", "None"], f"{out} ({sys.executable})"

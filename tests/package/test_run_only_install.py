"""What `scripts/demo` installs (dagq without extras) is enough for the CLI and the
embedded store: no command module needs the Azure SDKs or the test tools to load."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        top = name.split('.')[0]
        if top in {'azure', 'requests', 'httpx', 'pytest', 'hypothesis', 'mypy', 'ruff'}:
            raise ModuleNotFoundError(f'No module named {name!r} (blocked)', name=name)
        return None
sys.meta_path.insert(0, Block())
sys.argv = ['dagq'] + sys.argv[1:]
from dagq.cli.main import main
main()
"""


def dagq(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCK, *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


def test_the_cli_loads_without_the_azure_extra(tmp_path: Path) -> None:
    result = dagq(tmp_path, "--help")
    assert result.returncode == 0, result.stderr
    assert "run" in result.stdout and "batch-feed" in result.stdout


def test_an_embedded_run_needs_no_extra(tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(
        "name: tiny\ntasks:\n  - name: a\n    kwargs: {cmd: 'echo hi'}\n")
    result = dagq(tmp_path, "--store", f"sqlite:{tmp_path}/x.db", "run", "wf.yaml")
    assert result.returncode == 0, result.stderr

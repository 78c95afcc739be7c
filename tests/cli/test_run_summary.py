"""`dagq run` ends a failed run with a summary naming each failed task, its error's
meaningful line and the command that prints its log; that command works."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DAGQ = str(Path(sys.executable).parent / "dagq")
pytestmark = pytest.mark.slow


def test_a_failed_run_names_its_failed_tasks_and_their_log_commands(tmp_path: Path) -> None:
    env = dict(os.environ, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}")
    (tmp_path / "wf.yaml").write_text(
        "name: train\ntasks:\n"
        "  - name: fit\n    kwargs: {cmd: 'echo epoch 1; "
        "echo \"RuntimeError: CUDA out of memory\" >&2; exit 1'}\n"
        "  - name: good\n    kwargs: {cmd: 'echo fine'}\n"
        "  - name: report\n    depends_on: [fit, good]\n    kwargs: {cmd: 'true'}\n")
    run = subprocess.run([DAGQ, "run", "--id", "train-1", str(tmp_path / "wf.yaml")],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    summary = run.stderr[run.stderr.index("failed tasks:"):]
    assert summary.splitlines() == [
        "failed tasks:",
        "  fit (attempt 1): RuntimeError: CUDA out of memory",
        "    log: dagq logs train-1 fit",
    ]
    shown = subprocess.run([DAGQ, "logs", "train-1", "fit"], env=env, capture_output=True,
                           text=True, timeout=60)
    assert shown.stdout == "epoch 1\nRuntimeError: CUDA out of memory\n"

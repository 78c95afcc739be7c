"""Examples run from any directory (issue 31, point 2): a task's relative ``kwargs.cwd``
is relative to the definition file that sets it."""

from __future__ import annotations

from pathlib import Path

from dagq.cli.definitions import anchor_cwd
from dagq.core.model import SubWorkflow, TaskDef, WorkflowDef
from tests.cli.kit import REPO, dagq, store_env


def test_the_ml_pipeline_runs_from_another_directory(tmp_path: Path) -> None:
    env = store_env(tmp_path)
    example = REPO / "examples" / "ml-pipeline" / "pipeline.yaml"
    out = dagq(env, "run", str(example), "--id", "ml-1", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "can't open file" not in out.stderr
    assert not (tmp_path / ".dagq").exists()  # the store is the one DAGQ_STORE names


def test_relative_cwd_is_anchored_to_the_file_and_nothing_else_changes(
        tmp_path: Path) -> None:
    child = WorkflowDef("child", (TaskDef("c", {"cmd": "true", "cwd": "data"}),))
    defn = WorkflowDef("p", (
        TaskDef("rel", {"cmd": "true", "cwd": "."}),
        TaskDef("up", {"cmd": "true", "cwd": "../shared"}),
        TaskDef("abs", {"cmd": "true", "cwd": "/srv/x"}),
        TaskDef("param", {"cmd": "true", "cwd": "{params.dir}"}),
        TaskDef("none", {"cmd": "true"}),
        TaskDef("sub", workflow=SubWorkflow(child, "sub/child.yaml")),
    ))
    out = anchor_cwd(defn, str(tmp_path / "flows" / "p.yaml"))
    cwd = {t.name: t.kwargs.get("cwd") for t in out.tasks}
    assert cwd == {"rel": str(tmp_path / "flows"), "up": str(tmp_path / "shared"),
                   "abs": "/srv/x", "param": "{params.dir}", "none": None, "sub": None}
    sub = out.tasks[-1].workflow
    assert sub is not None and sub.definition is not None
    assert sub.definition.tasks[0].kwargs["cwd"] == str(tmp_path / "flows" / "sub" / "data")
    plain = WorkflowDef("q", (TaskDef("a", {"cmd": "true"}),))
    assert anchor_cwd(plain, "q.yaml") is plain

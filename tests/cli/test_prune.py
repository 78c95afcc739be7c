"""Retention rules: ages, and that only finished top-level workflows are removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagq.backends import open_backend
from dagq.client import WorkflowClient
from dagq.core.model import TaskDef, WorkflowDef
from dagq.ops.retention import parse_age, prune


@pytest.mark.parametrize(("text", "seconds"), [
    ("30d", 30 * 86400), ("12h", 43200), ("90m", 5400), ("2w", 14 * 86400), ("1.5s", 1.5)])
def test_ages(text: str, seconds: float) -> None:
    assert parse_age(text) == seconds


@pytest.mark.parametrize("text", ["", "30", "d", "-1d", "3 days", "1y"])
def test_bad_ages_say_what_to_write(text: str) -> None:
    with pytest.raises(ValueError, match=r"use a number and a unit s, m, h, d or w"):
        parse_age(text)


def test_an_old_workflow_that_has_not_finished_is_kept(tmp_path: Path) -> None:
    backend = open_backend(f"sqlite:{tmp_path / 'x.db'}")
    client = WorkflowClient(backend, clock=lambda: 1000.0)  # submitted long ago
    defn = WorkflowDef("old", (TaskDef("a", {"cmd": "true"}),))
    client.submit(defn, workflow_id="old-pending")
    finished = client.submit(defn, workflow_id="old-done").id
    row = backend.index.get(finished)
    backend.index.update_progress(finished, status="completed", counts={"completed": 1},
                                  updated_at=row.updated_at)
    ids, removed = prune(backend, older_than_s=60, now=10_000.0)
    assert ids == ["old-done"] and removed.workflows == 1
    assert [r.id for r in backend.index.query()] == ["old-pending"]
    assert backend.states.read("old-pending")
    backend.close()

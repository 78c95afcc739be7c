"""One exit-code table for every command (issue 31, point 7): 5 for anything not found,
6 when cancel/retry find the workflow already finished (not 3, which is "cancelled"),
130 for Ctrl-C (see also test_run_interrupt.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagq.cli.exits import ALREADY_FINISHED, CANCELLED, NOT_FOUND, NOT_STARTED
from tests.cli.kit import dagq, define, store_env

ONE = "name: one\ntasks:\n  - name: a\n    kwargs: {cmd: 'echo hi'}\n"


@pytest.fixture
def ran(tmp_path: Path) -> dict[str, str]:
    env = store_env(tmp_path)
    out = dagq(env, "run", str(define(tmp_path, "one.yaml", ONE)), "--id", "done-1")
    assert out.returncode == 0, out.stderr
    return env


@pytest.mark.parametrize("args", [
    ["status", "nope"], ["cancel", "nope"], ["retry", "nope"], ["logs", "nope", "a"],
    ["logs", "nope"], ["graph", "nope"], ["wait", "nope"], ["watch", "nope"],
    ["explain", "nope"], ["task", "nope", "a"], ["output", "nope", "a"], ["tasks", "nope"],
    ["files", "nope", "a"],
])
def test_a_missing_workflow_exits_5(ran: dict[str, str], args: list[str]) -> None:
    out = dagq(ran, *args)
    assert out.returncode == NOT_FOUND, out
    assert "nope" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("args", [
    ["task", "done-1", "b"], ["output", "done-1", "b"], ["logs", "done-1", "b"],
    ["explain", "done-1", "b"], ["logs", "done-1", "a", "--attempt", "4"],
])
def test_a_missing_task_or_attempt_exits_5(ran: dict[str, str], args: list[str]) -> None:
    out = dagq(ran, *args)
    assert out.returncode == NOT_FOUND, out
    assert "Traceback" not in out.stderr


def test_already_finished_is_not_cancelled(ran: dict[str, str]) -> None:
    for verb in ("cancel", "retry"):
        out = dagq(ran, verb, "done-1")
        assert out.returncode == ALREADY_FINISHED != CANCELLED, out
        assert "completed" in out.stderr


def test_a_cancelled_workflow_exits_3_from_wait(tmp_path: Path) -> None:
    env = store_env(tmp_path)
    path = define(tmp_path, "wf.yaml", ONE)
    assert dagq(env, "submit", str(path), "--id", "c-1").returncode == 0
    assert dagq(env, "cancel", "c-1").returncode == 0
    assert dagq(env, "wait", "c-1").returncode == CANCELLED
    assert dagq(env, "logs", "c-1", "a").returncode == NOT_STARTED


def test_the_table_is_in_the_docs() -> None:
    from tests.cli.kit import REPO

    text = (REPO / "docs" / "observing.md").read_text()
    for row in ("| 5 |", "| 6 |", "| 7 |", "| 130 |"):
        assert row in text

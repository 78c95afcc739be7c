"""The state is the truth: a cancel or retry that stops between its state write and its
stop-signal writes (a crash, at crash point ``control_written``) leaves hint and flag to
the coordinator's sweep, which publishes them from the state; a flag is applied as a
cancel only when an older client set it (no hint, no retry just now)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from dagq.core.engine import dumps, loads
from dagq.ports import Backend, ChildWorkflows
from dagq.protocol.cancels import CANCELS
from dagq.runtime.cancels import finish_cancels
from dagq.runtime.control import Control
from dagq.runtime.coordinator import Coordinator
from tests.control.race_kit import cancel, disagreement, retry, started


class Crash(BaseException):
    """The process dies here."""


@pytest.fixture
def crash(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Arms ``control_written`` for the next request."""
    armed: list[bool] = []

    def crash_point(name: str) -> None:
        if name == "control_written" and armed:
            armed.clear()
            raise Crash(name)
    monkeypatch.setattr("dagq.runtime.control.crash_point", crash_point)
    return lambda: armed.append(True)


def sweep(coord: Coordinator) -> None:
    finish_cancels(coord.backend, coord.clock(), commits=coord.committer,
                   control=coord.control, children=coord.children, clock=coord.clock)


def cancel_requested(backend: Backend) -> bool:
    return loads(backend.states.read("w")[0]).cancel_requested


def test_a_cancel_stopped_after_its_state_write_is_published_by_the_sweep(
        tmp_path: Path, crash: Callable[[], None]) -> None:
    backend, coord = started(f"sqlite:{tmp_path / 'x.db'}")
    crash()
    with pytest.raises(Crash):
        cancel(Control(backend), "w")
    assert cancel_requested(backend)
    assert not backend.index.get("w").cancel_requested  # the flag was not written yet
    sweep(coord)
    assert disagreement(backend, "w") is None


def test_a_retry_stopped_after_its_state_write_is_not_turned_into_a_cancel(
        tmp_path: Path, crash: Callable[[], None]) -> None:
    backend, coord = started(f"sqlite:{tmp_path / 'x.db'}")
    cancel(Control(backend), "w")
    crash()
    with pytest.raises(Crash):
        retry(Control(backend), "w")
    assert "w" in dict(backend.records.list(CANCELS))  # the hint was not deleted yet
    sweep(coord)
    assert not cancel_requested(backend)
    assert disagreement(backend, "w") is None


def test_a_flag_whose_hint_is_gone_gets_it_back(tmp_path: Path) -> None:
    backend, coord = started(f"sqlite:{tmp_path / 'x.db'}")
    cancel(Control(backend), "w")
    backend.records.delete(CANCELS, "w")  # pruned while a new cancel was written
    sweep(coord)
    assert disagreement(backend, "w") is None


def test_a_flag_an_older_client_set_alone_is_applied(tmp_path: Path) -> None:
    backend, coord = started(f"sqlite:{tmp_path / 'x.db'}")
    backend.index.request_cancel("w")
    sweep(coord)
    assert cancel_requested(backend)
    assert disagreement(backend, "w") is None


@pytest.mark.parametrize("leftover", ["hint", "recent retry"])
def test_a_flag_a_current_client_is_putting_right_is_not_applied(
        tmp_path: Path, leftover: str) -> None:
    backend, coord = started(f"sqlite:{tmp_path / 'x.db'}")
    cancel(Control(backend), "w")
    retry(Control(backend), "w")
    backend.index.request_cancel("w")  # a concurrent cancel's publish, not yet re-checked
    if leftover == "hint":
        backend.records.put(CANCELS, "w", {"at": coord.clock()})
        state = loads(backend.states.read("w")[0])
        state.retry_ids.clear()  # only the hint tells
        backend.states.replace("w", dumps(state), backend.states.etag("w"))
    asked: list[str] = []

    def descendants(workflow_id: str) -> list[object]:
        asked.append(workflow_id)
        return []
    coord.children = cast(ChildWorkflows, SimpleNamespace(descendants=descendants))
    sweep(coord)
    assert not cancel_requested(backend)
    assert asked == []  # nor are its children cancelled
    assert disagreement(backend, "w") is None

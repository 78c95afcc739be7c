"""Stress: cancel, retry and cancel race on one workflow, round after round, each request
from its own thread and store connection; after every round the stop signal (hint, index
flag, and what a worker's cancel poll does to the running attempts) agrees with the
state, whatever order the requests landed in."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dagq.backends import open_backend
from dagq.core.engine import loads
from dagq.runtime.control import Control
from tests.control.race_kit import cancel, disagreement, retry, started

SQLITE_ROUNDS = 50
AZURITE_ROUNDS = 12


Op = Callable[[Control, str], None]


def one_round(ops: list[Op], controls: list[Control], delays: list[float]) -> None:
    """Start the requests together (each after its delay), each in its own thread; raise
    what any of them raised."""
    gate = threading.Barrier(len(ops))
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            gate.wait()
            time.sleep(delays[i])
            ops[i](controls[i], "w")
        except BaseException as exc:  # raised below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(ops))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    if errors:
        raise errors[0]


def race(store: str, connection: str | None, rounds: int) -> dict[str, int]:
    """Run the rounds; how often each outcome (cancel requested or not) came out."""
    backend, _ = started(store, connection=connection)
    ops: list[Op] = [cancel, retry, cancel]
    controls = [Control(open_backend(store, connection_string=connection)) for _ in ops]
    rng = random.Random(7)
    outcomes = {"cancel requested": 0, "retried": 0}
    for n in range(rounds):
        one_round(ops, controls, [rng.random() * 0.004 for _ in ops])
        assert disagreement(backend, "w") is None, f"round {n}"
        requested = loads(backend.states.read("w")[0]).cancel_requested
        outcomes["cancel requested" if requested else "retried"] += 1
    return outcomes


def test_cancel_retry_cancel_race_on_sqlite(tmp_path: Path) -> None:
    outcomes = race(f"sqlite:{tmp_path / 'x.db'}", None, SQLITE_ROUNDS)
    assert min(outcomes.values()) > 0  # both orders happened


@pytest.mark.azurite
def test_cancel_retry_cancel_race_on_azurite(azurite_store: tuple[str, str]) -> None:
    store, connection = azurite_store
    outcomes = race(store, connection, AZURITE_ROUNDS)
    assert sum(outcomes.values()) == AZURITE_ROUNDS

"""Cancel and retry are linearisable: one request run to its end at every store call of
another (each interleaving in turn) leaves the stop signal agreeing with the state.

The first test is the reported race (``dagq cancel ID & dagq retry ID``): a whole cancel
lands between the retry's state write and its clearing of the cancel hint; the retry
used to delete the hint that cancel had just written, so the state said "cancel
requested" while no worker was ever told to stop.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dagq.core.engine import loads
from dagq.ports import Backend
from dagq.protocol.cancels import CANCELS
from dagq.runtime.control import Control
from tests.control.race_kit import cancel, disagreement, interrupting, retry, started

Op = Callable[[Control, str], None]


def test_cancel_between_the_retry_write_and_its_hint_delete_still_stops(
        tmp_path: Path) -> None:
    backend, _ = started(f"sqlite:{tmp_path / 'x.db'}")
    cancel(Control(backend), "w")
    other = Control(backend)
    fired: list[str] = []

    def hook(name: str) -> None:
        if name == "delete" and not fired:  # the retry's state write is done
            fired.append(name)
            cancel(other, "w")

    retry(Control(interrupting(backend, hook)), "w")
    assert fired
    state = loads(backend.states.read("w")[0])
    assert state.cancel_requested  # the cancel landed last
    assert "w" in dict(backend.records.list(CANCELS))  # ... so workers are told to stop
    assert disagreement(backend, "w") is None


def interleavings(backend: Backend, first: Op, second: Op, k: int) -> bool:
    """Run ``first``, and ``second`` in full just before ``first``'s ``k``-th store call;
    False once ``first`` makes fewer than ``k`` calls."""
    calls = [0]
    other = Control(backend)

    def hook(name: str) -> None:
        calls[0] += 1
        if calls[0] == k:
            second(other, "w")

    first(Control(interrupting(backend, hook)), "w")
    return calls[0] >= k


@pytest.mark.parametrize("before", ["running", "cancelled"])
@pytest.mark.parametrize(("first", "second"), [(retry, cancel), (cancel, retry)],
                         ids=["cancel-inside-retry", "retry-inside-cancel"])
def test_every_interleaving_of_two_requests_agrees(
        tmp_path: Path, before: str, first: Op, second: Op) -> None:
    k = 1
    while True:
        backend, _ = started(f"sqlite:{tmp_path / f'{k}.db'}")
        if before == "cancelled":
            cancel(Control(backend), "w")
        more = interleavings(backend, first, second, k)
        assert disagreement(backend, "w") is None, f"second request at call {k}"
        if not more:
            break
        k += 1
    assert k > 4  # each request makes several store calls

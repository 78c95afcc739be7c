"""During a store outage a coordinator invocation holds for a growing back-off, then lets
the error through so the host retries: its few retries then span a longer outage."""

from __future__ import annotations

import pytest

from dagq.errors import StoreUnavailable
from dagq.functions.completions import OUTAGE_HOLD_MAX_S, Received, apply_received
from dagq.functions.runtime import Runtime


@pytest.mark.parametrize(("delivery", "hold"), [(1, 1.0), (3, 4.0), (30, OUTAGE_HOLD_MAX_S)])
def test_an_outage_holds_then_propagates(runtime: Runtime, monkeypatch: pytest.MonkeyPatch,
                                         delivery: int, hold: float) -> None:
    coord = runtime.coordinator()

    def down(*_: object) -> None:  # injected fault: the store is unreachable
        raise StoreUnavailable("injected outage")

    monkeypatch.setattr(coord, "apply_messages", down)
    slept: list[float] = []
    with pytest.raises(StoreUnavailable):
        apply_received(runtime, [Received("m", b"{}", delivery_count=delivery)],
                       sleep=slept.append)
    assert slept == [hold]

"""GpuPool: disjoint device groups, waiting for a free group, and bad device lists."""

from __future__ import annotations

import threading

import pytest

from dagq.errors import ConfigError
from dagq.worker.gpu import GpuPool


def test_groups_are_disjoint_and_a_taker_waits_for_a_free_one() -> None:
    pool = GpuPool(2, ["0", "1", "2", "3", "4"])
    assert pool.slots == 2
    first, second = pool.acquire(), pool.acquire()
    assert len(first) == len(second) == 2 and not set(first) & set(second)
    got: list[list[str]] = []
    taker = threading.Thread(target=lambda: got.append(pool.acquire()))
    taker.start()
    taker.join(0.2)
    assert taker.is_alive() and not got  # one GPU left: not enough for a group
    pool.release(first)
    taker.join(10)
    assert len(got[0]) == 2 and not set(got[0]) & set(second)


@pytest.mark.parametrize(("per_task", "gpus", "message"), [
    (2, ["0"], "--gpus-per-task 2 needs at least 2 GPU(s) but 1 were found (0)"),
    (1, [], "needs at least 1 GPU(s) but 0 were found (none)"),
    (1, ["0", "1", "0"], "--gpus 0,1,0 names GPU(s) 0 more than once"),
    (0, ["0"], "--gpus-per-task must be at least 1"),
])
def test_bad_device_lists_are_refused(per_task: int, gpus: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        GpuPool(per_task, gpus)
    assert message in str(err.value)

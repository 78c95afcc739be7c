"""Workflow factories that schedules name by import path in the tests."""

from __future__ import annotations

from dagq.compose import Workflow, task

CALLS: list[str] = []
"""The ``day`` of every call, so tests can see the factory ran at each fire time."""


def nightly(day: str, shards: int = 2) -> Workflow:
    """One task per shard of ``day``: the shape of the workflow depends on its params."""
    CALLS.append(day)
    return Workflow(f"nightly-{day}", *(task(f"shard-{i}", cmd=f"echo {day} {i}")
                                        for i in range(shards)))


def broken(day: str) -> Workflow:
    """A factory that fails."""
    raise RuntimeError(f"no data for {day}")

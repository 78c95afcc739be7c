"""Small helpers shared by the contract tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def eventually(probe: Callable[[], T], within_s: float, every_s: float = 0.02) -> T:
    """The first truthy result of ``probe``; fails the test after ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {within_s} s (last result: {result!r})")
        time.sleep(every_s)

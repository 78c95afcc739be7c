"""Fixtures of the worker tests: a ``Stack`` (real ``dagq`` processes plus an in-process
backend) on the embedded store, and on Azurite for the tests that take ``stack``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import DAGQ, Dagq
from tests.worker.stack import STACK_ENV, Stack


def _stack(tmp_path: Path, store: str, conn: str | None) -> Stack:
    if not DAGQ.exists():
        pytest.fail(f"{DAGQ} is missing: install the project into the venv (see README)")
    env = {**STACK_ENV, "DAGQ_STORE": store}
    if conn is not None:
        env["DAGQ_STORAGE_CONNECTION_STRING"] = conn
    return Stack(Dagq(tmp_path, base_env=env), store, conn)


@pytest.fixture(params=["sqlite", pytest.param("azurite", marks=pytest.mark.azurite)])
def stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stack]:
    """A stack on the embedded store, then on a fresh Azurite prefix."""
    if request.param == "azurite":
        store, conn = request.getfixturevalue("azurite_store")
        s = _stack(tmp_path, store, conn)
    else:
        s = _stack(tmp_path, f"sqlite:{tmp_path / 'x.db'}", None)
    yield s
    s.close()


@pytest.fixture
def sqlite_stack(tmp_path: Path) -> Iterator[Stack]:
    """A stack on the embedded store only."""
    s = _stack(tmp_path, f"sqlite:{tmp_path / 'x.db'}", None)
    yield s
    s.close()

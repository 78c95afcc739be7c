"""A fresh backend per test: the embedded store, or a new prefix on Azurite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dagq.backends import open_backend
from dagq.ports import Backend

STORES = [pytest.param("sqlite", id="sqlite"),
          pytest.param("azurite", id="azurite", marks=pytest.mark.azurite)]


@pytest.fixture(params=STORES)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """An empty store."""
    if request.param == "sqlite":
        b = open_backend(f"sqlite:{tmp_path / 'x.db'}")
    else:
        store, connection = request.getfixturevalue("azurite_store")
        b = open_backend(store, connection_string=connection)
    try:
        yield b
    finally:
        b.close()

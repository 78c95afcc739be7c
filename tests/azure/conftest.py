"""Fixtures of the Azure adapter tests: fresh stores on the session's Azurite."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dagq.backends.azure import AzureBackend, open_azure_backend

Opener = Callable[..., AzureBackend]


@pytest.fixture
def open_store(azurite_store: tuple[str, str]) -> Iterator[Opener]:
    """Opens backends on one fresh Azurite store (options as for ``open_azure_backend``);
    all are closed after the test."""
    opened: list[AzureBackend] = []
    store_url, conn = azurite_store

    def open_(**options: Any) -> AzureBackend:
        backend = open_azure_backend(store_url, connection_string=conn, **options)
        assert isinstance(backend, AzureBackend)
        opened.append(backend)
        return backend

    yield open_
    for backend in opened:
        backend.close()


@pytest.fixture
def store(open_store: Opener) -> AzureBackend:
    """A backend on a fresh Azurite store."""
    return open_store(max_deliveries=3)

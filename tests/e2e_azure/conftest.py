"""Fixtures of the end-to-end tests on Azurite: the real ``dagq`` CLI on a fresh
``azure://`` store per test.

``az`` is the same driver as the embedded end-to-end tests (``tests/e2e/harness.Dagq``),
pointed at the session's Azurite through ``DAGQ_STORE`` and
``DAGQ_STORAGE_CONNECTION_STRING``, with short tunables so that cancels, sweeps and
crash recovery take seconds. Every process it started is stopped afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dagq.backends import open_backend
from dagq.ports import Backend
from tests.e2e.harness import DAGQ, Dagq

AZURE_ENV: dict[str, str] = {
    "DAGQ_CANCEL_POLL_INTERVAL": "0.5",
    "DAGQ_SWEEP_INTERVAL": "1",
    "DAGQ_OUTBOX_GRACE": "2",
    "DAGQ_OUTBOX_FLUSH": "0.2",
    "DAGQ_VISIBILITY_TIMEOUT": "3",
    "DAGQ_IDLE_POLL": "0.2",
    "DAGQ_MAX_IDLE_BACKOFF": "0.3",
    # a submission is started at once; the sweep must not race it on a slow emulator
    "DAGQ_STALE_PENDING": "30",
}
"""Tunables of every ``dagq`` process in these tests (Azurite serves ~100 requests/s)."""


@pytest.fixture
def az(azurite_store: tuple[str, str], tmp_path: Path) -> Iterator[Dagq]:
    """The CLI on a fresh Azurite store (own prefix); no process running yet."""
    if not DAGQ.exists():
        pytest.fail(f"{DAGQ} is missing: install the project into the venv (see README)")
    store, conn = azurite_store
    d = Dagq(tmp_path, base_env={
        **AZURE_ENV, "DAGQ_STORE": store, "DAGQ_STORAGE_CONNECTION_STRING": conn})
    yield d
    d.close()


@pytest.fixture
def az_backend(az: Dagq) -> Iterator[Backend]:
    """The store of ``az`` opened in this process, to look at what the CLI left behind."""
    backend = open_backend(az.store,
                           connection_string=az.base_env["DAGQ_STORAGE_CONNECTION_STRING"])
    yield backend
    backend.close()

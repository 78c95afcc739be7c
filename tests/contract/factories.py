"""How the contract suite opens backends, and the always-available SQLite factory.

A ``BackendFactory`` turns a ``ContractEnv`` (one per test) into a context manager that
yields a ``Backend``. Opening the same env twice must give two handles on the same
store, so tests can play two processes against each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dagq.backends import open_backend
from dagq.ports import Backend

MAX_DELIVERIES = 3
"""Max deliveries every contract backend is opened with (``ContractEnv.max_deliveries``)."""


@dataclass(frozen=True)
class ContractEnv:
    """What a factory gets for one test."""

    tmp_path: Path
    """A private temporary directory of the test."""
    namespace: str
    """Unique per test (lowercase letters and digits, starts with a letter): use it to
    keep tests apart on a shared service (container/table/queue prefixes)."""
    max_deliveries: int
    """The backend must dead-letter a message delivered more than this many times."""
    request: pytest.FixtureRequest
    """The test's request, e.g. for ``request.getfixturevalue("azurite")``."""


@dataclass(frozen=True)
class BackendFactory:
    """One backend the contract suite runs against."""

    id: str
    """Test id suffix, e.g. ``sqlite`` in ``test_create[sqlite]``."""
    open: Callable[[ContractEnv], AbstractContextManager[Backend]]
    """Opens (and on exit closes) a backend for the env."""
    tick_s: float = 0.2
    """Shortest visibility timeout / delay the backend honours (1.0 for whole-second
    services). Tests wait multiples of it."""
    dedup: bool = True
    """Whether ``send(message_id=...)`` drops a repeated id (see the Queue port)."""
    marks: tuple[Any, ...] = ()
    """pytest marks for this backend's tests (e.g. ``pytest.mark.azurite``)."""


@contextmanager
def _open_sqlite(env: ContractEnv) -> Iterator[Backend]:
    backend = open_backend(
        f"sqlite:{env.tmp_path / 'store' / 'dagq.db'}", max_deliveries=env.max_deliveries
    )
    try:
        yield backend
    finally:
        backend.close()


SQLITE = BackendFactory(id="sqlite", open=_open_sqlite, tick_s=0.2)
"""The embedded backend on a file in the test's temporary directory."""

"""Fixtures of the end-to-end tests: a temporary store driven through the real CLI.

``dagq``: a fresh store per test (start processes with ``dagq.coordinator()`` /
``dagq.worker(queue)``; all are stopped afterwards). ``cluster``: one store per module
with a coordinator and workers already running on the ``default`` and ``other`` queues,
for tests that only submit and inspect.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import DAGQ, Dagq


def _check_cli() -> None:
    if not DAGQ.exists():
        pytest.fail(f"{DAGQ} is missing: install the project into the venv (see README)")


@pytest.fixture
def dagq(tmp_path: Path) -> Iterator[Dagq]:
    """The CLI on a fresh temporary store; no process running yet."""
    _check_cli()
    d = Dagq(tmp_path)
    yield d
    d.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dagq]:
    """A store with a coordinator and workers (``default`` x4, ``other`` x1) running."""
    _check_cli()
    d = Dagq(tmp_path_factory.mktemp("cluster"))
    d.coordinator()
    d.worker("default", concurrency=4)
    d.worker("other", concurrency=1)
    yield d
    d.close()

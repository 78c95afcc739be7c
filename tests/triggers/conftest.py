"""Fixtures of the trigger tests: a fresh SQLite store and a workflow taking ``path``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dagq.backends.sqlite import SqliteBackend  # noqa: E402
from dagq.core.parse import load_definition  # noqa: E402
from dagq.triggers.store import Source, Trigger  # noqa: E402

WORKFLOW_YAML = """\
name: ingest
parameters:
  path: {type: string}
tasks:
  - name: load
    kwargs: {cmd: "wc -c {params.path}"}
"""


def make_trigger(prefix: str, name: str = "inbox", source: Source = "files") -> Trigger:
    """A trigger starting ``ingest`` with the object's path as ``path``."""
    return Trigger(name=name, source=source, prefix=prefix, param="path",
                   definition=load_definition(WORKFLOW_YAML, source="ingest.yaml"),
                   created_at=datetime(2026, 3, 2, tzinfo=UTC))


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[SqliteBackend]:
    b = SqliteBackend(tmp_path / "dagq.db")
    yield b
    b.close()

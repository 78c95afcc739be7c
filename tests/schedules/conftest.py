"""Fixtures of the schedule tests: a fresh SQLite store, a workflow, specs and a clock."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dagq.backends.sqlite import SqliteBackend  # noqa: E402
from dagq.core.model import WorkflowDef  # noqa: E402
from dagq.core.parse import load_definition  # noqa: E402
from dagq.core.schedule.policy import ScheduleSpec  # noqa: E402
from dagq.schedules.store import ScheduleStore  # noqa: E402

T0 = datetime(2026, 3, 2, 0, 0, 30, tzinfo=UTC)
"""When the test schedules are added (a Monday, half a minute past midnight UTC)."""

WORKFLOW_YAML = """\
name: report
params: {region: us, size: 1}
tasks:
  - name: extract
    kwargs: {cmd: "echo extract"}
  - name: load
    kwargs: {cmd: "echo load"}
    depends_on: [extract]
"""


@dataclass
class Clock:
    """A clock the test moves by hand."""

    now: datetime = T0

    def time(self) -> float:
        """Epoch seconds of ``now`` (the ``clock`` callable components take)."""
        return self.now.timestamp()


def make_spec(name: str = "hourly", cron: str = "0 * * * *", **fields: Any) -> ScheduleSpec:
    """A spec added at ``T0`` unless ``created_at`` is given."""
    fields.setdefault("created_at", T0)
    return ScheduleSpec(name=name, cron=cron, **fields)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Path of the test's SQLite store."""
    return tmp_path / "dagq.db"


@pytest.fixture
def backend(db_path: Path) -> Iterator[SqliteBackend]:
    """A fresh SQLite store."""
    b = SqliteBackend(db_path)
    yield b
    b.close()


@pytest.fixture
def store(backend: SqliteBackend) -> ScheduleStore:
    """Schedules on ``backend``."""
    return ScheduleStore(backend)


@pytest.fixture
def workflow() -> WorkflowDef:
    """A two-task workflow with default params."""
    return load_definition(WORKFLOW_YAML)


@pytest.fixture
def clock() -> Clock:
    """A hand-moved clock starting at ``T0``."""
    return Clock()

"""Fixtures of the Functions handler tests: an app-settings dict per store, a runtime on
it, and every function of the app built from fresh blueprints."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dagq.functions.coordinator_queue import storage_queue_blueprint  # noqa: E402
from dagq.functions.coordinator_sb import servicebus_blueprint  # noqa: E402
from dagq.functions.http_api import http_blueprint  # noqa: E402
from dagq.functions.runtime import Runtime  # noqa: E402
from dagq.functions.timers import timers_blueprint  # noqa: E402
from dagq.ports import Backend  # noqa: E402
from tests.functions.host import Handler, app_of, user_functions  # noqa: E402

STORES = [pytest.param("sqlite", id="sqlite"),
          pytest.param("azurite", id="azurite", marks=pytest.mark.azurite)]


@pytest.fixture(params=STORES)
def app_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """App settings of a fresh, empty store (SQLite file, or a new prefix on Azurite)."""
    kind = request.param
    if kind == "sqlite":
        return {"DAGQ_STORE": f"sqlite:{tmp_path / 'dagq.db'}", "DAGQ_MAX_DELIVERIES": "3"}
    store, connection = request.getfixturevalue("azurite_store")
    prefix = store.rsplit("/", 1)[1]
    return {"DAGQ_STORE": store, "DAGQ_STORAGE_CONNECTION_STRING": connection,
            "DAGQ_MAX_DELIVERIES": "3", "DAGQ_COMPLETION_QUEUE": f"{prefix}-completions"}


@pytest.fixture
def runtime(app_env: dict[str, str]) -> Iterator[Runtime]:
    """The handlers' shared runtime on ``app_env``."""
    rt = Runtime(app_env)
    yield rt
    rt.close()


@pytest.fixture
def backend(runtime: Runtime) -> Backend:
    """The runtime's store (to inspect what the handlers wrote)."""
    return runtime.backend()


@pytest.fixture
def fns(runtime: Runtime) -> dict[str, Handler]:
    """Every function (HTTP, both coordinators, timer) bound to ``runtime``, by name."""
    app = app_of(http_blueprint(runtime, "storage_queue"), storage_queue_blueprint(runtime),
                 servicebus_blueprint(runtime), timers_blueprint(runtime, "*/30 * * * * *"))
    return user_functions(app)

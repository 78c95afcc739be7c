"""The backend contract suite: every test here runs once per registered backend.

Registering a backend: write a module exposing ``CONTRACT_BACKENDS: list[BackendFactory]``
(see ``tests/contract/factories.py``) and name it in ``OPTIONAL_MODULES`` below. A missing
module is skipped silently; a module that fails to import fails the run. Fixtures the
module defines and lists in ``CONTRACT_FIXTURES`` (e.g. a session fixture that starts an
emulator) are made visible to the contract tests, so a factory can request them through
``env.request.getfixturevalue(...)``.
"""

from __future__ import annotations

import importlib
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dagq.ports import Backend  # noqa: E402
from tests.contract.factories import MAX_DELIVERIES, SQLITE, BackendFactory, ContractEnv  # noqa: E402

OPTIONAL_MODULES: list[str] = ["tests.fixtures.azurite"]
"""Modules that may add backends (ignored when absent)."""


def _import_optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and (name == e.name or name.startswith(e.name + ".")):
            return None
        raise


BACKENDS: list[BackendFactory] = [SQLITE]
"""Every backend the contract suite runs against."""

for _name in OPTIONAL_MODULES:
    _module = _import_optional(_name)
    if _module is not None:
        BACKENDS.extend(_module.CONTRACT_BACKENDS)
        for _fixture in getattr(_module, "CONTRACT_FIXTURES", ()):
            globals()[_fixture] = getattr(_module, _fixture)


@pytest.fixture(params=[pytest.param(f, id=f.id, marks=list(f.marks)) for f in BACKENDS])
def factory(request: pytest.FixtureRequest) -> BackendFactory:
    """The backend factory of this test run."""
    param: BackendFactory = request.param
    return param


@pytest.fixture
def env(factory: BackendFactory, tmp_path: Path, request: pytest.FixtureRequest) -> ContractEnv:
    """The per-test environment handed to the factory."""
    return ContractEnv(tmp_path=tmp_path, namespace="t" + uuid.uuid4().hex[:11],
                       max_deliveries=MAX_DELIVERIES, request=request)


@pytest.fixture
def backend(factory: BackendFactory, env: ContractEnv) -> Iterator[Backend]:
    """A fresh, empty store."""
    with factory.open(env) as b:
        yield b


@pytest.fixture
def other(factory: BackendFactory, env: ContractEnv, backend: Backend) -> Iterator[Backend]:
    """A second handle on the same store as ``backend`` (as another process would have)."""
    with factory.open(env) as b:
        yield b


@pytest.fixture
def tick(factory: BackendFactory) -> float:
    """The shortest timeout the backend honours."""
    return factory.tick_s

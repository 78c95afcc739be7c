"""The queue contract suite on a real Service Bus namespace (storage on Azurite).

No Service Bus emulator runs on CI machines, so this module runs only when
``DAGQ_TEST_SERVICEBUS_CONNECTION_STRING`` names a namespace (its key needs the Manage
right: every test creates its own queues, with a 5 s lock duration, and deletes them).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from azure.servicebus.management import ServiceBusAdministrationClient

from dagq.backends.azure import open_azure_backend
from dagq.ports import Backend
from tests.contract.factories import MAX_DELIVERIES, BackendFactory, ContractEnv
from tests.contract.test_contract_queue import *  # noqa: F403
from tests.contract.test_contract_queue_delivery import *  # noqa: F403
from tests.fixtures.azurite import ACCOUNT

VARIABLE = "DAGQ_TEST_SERVICEBUS_CONNECTION_STRING"
CONNECTION = os.environ.get(VARIABLE, "")
LOCK_S = 5.0

pytestmark = [
    pytest.mark.servicebus,
    pytest.mark.skipif(not CONNECTION, reason=(
        f"Service Bus queue contract not run: set {VARIABLE} to a namespace connection "
        "string with the Manage right (no Service Bus emulator runs here)")),
]


@contextmanager
def _open(env: ContractEnv) -> Iterator[Backend]:
    backend = open_azure_backend(
        f"azure://{ACCOUNT}/{env.namespace}", "sb://dagq-tests",
        connection_string=env.request.getfixturevalue("azurite"),
        servicebus_connection_string=CONNECTION, max_deliveries=env.max_deliveries,
        lock_duration_s=LOCK_S)
    try:
        yield backend
    finally:
        backend.close()


SERVICEBUS = BackendFactory(id="servicebus", open=_open, tick_s=LOCK_S, dedup=True)


@pytest.fixture
def factory() -> BackendFactory:
    """The Service Bus factory."""
    return SERVICEBUS


@pytest.fixture
def env(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ContractEnv]:
    """A per-test namespace; its queues are deleted afterwards."""
    namespace = "t" + uuid.uuid4().hex[:11]
    yield ContractEnv(tmp_path=tmp_path, namespace=namespace,
                      max_deliveries=MAX_DELIVERIES, request=request)
    with ServiceBusAdministrationClient.from_connection_string(CONNECTION) as admin:
        for queue in admin.list_queues():
            if queue.name.startswith(namespace + "-"):
                admin.delete_queue(queue.name)


@pytest.fixture
def backend(env: ContractEnv) -> Iterator[Backend]:
    """A fresh store whose queues are on Service Bus."""
    with _open(env) as b:
        yield b


@pytest.fixture
def other(env: ContractEnv, backend: Backend) -> Iterator[Backend]:
    """A second handle on the same store."""
    with _open(env) as b:
        yield b


@pytest.fixture
def tick() -> float:
    """The queue lock duration: the shortest visibility Service Bus honours."""
    return LOCK_S

"""Service Bus management calls (queue lengths, the queue list): active messages only, and
a refusal for want of the Manage right is a clear error that `dagq doctor` works around.

No Service Bus namespace is reachable here, so the management client is replaced by a
stand-in that answers like the service would (the injected fault is the 401)."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError

from dagq.backends.azure import open_azure_backend
from dagq.backends.azure.servicebus import ServiceBusQueues
from dagq.errors import MissingRight
from dagq.ports import Backend

NOWHERE = ("Endpoint=sb://127.0.0.1/;SharedAccessKeyName=RootManageSharedAccessKey;"
           "SharedAccessKey=notakey;UseDevelopmentEmulator=true;")


class Admin:
    """Answers runtime properties with separate active, scheduled and dead-letter counts,
    or refuses every call as a namespace does for a token without Manage."""

    def __init__(self, refuse: bool) -> None:
        self.refuse = refuse

    def _check(self) -> None:
        if self.refuse:
            err = HttpResponseError(message="Unauthorized: Manage claim(s) required")
            err.status_code = 401
            raise err

    def get_queue_runtime_properties(self, name: str) -> Any:
        self._check()
        return SimpleNamespace(active_message_count=2, scheduled_message_count=3,
                               dead_letter_message_count=40, total_message_count=45)

    def list_queues(self) -> list[Any]:
        self._check()
        return [SimpleNamespace(name="mlp-q-gpu"), SimpleNamespace(name="mlp-completions")]


@pytest.fixture
def backend() -> Iterator[Backend]:
    b = open_azure_backend("azure://devstoreaccount1/mlp", "sb://my-namespace",
                           connection_string="UseDevelopmentStorage=true",
                           servicebus_connection_string=NOWHERE)
    try:
        yield b
    finally:
        b.close()


def test_the_length_counts_active_messages_only(backend: Backend) -> None:
    assert isinstance(backend.queues, ServiceBusQueues)
    backend.queues.admin = Admin(refuse=False)  # type: ignore[assignment]
    assert backend.queues.get("gpu").approximate_count() == 2  # not the 40 dead letters


def test_without_the_manage_right_the_error_names_it(backend: Backend) -> None:
    assert isinstance(backend.queues, ServiceBusQueues)
    backend.queues.admin = Admin(refuse=True)  # type: ignore[assignment]
    with pytest.raises(MissingRight) as err:
        backend.queues.get("gpu").approximate_count()
    assert "Manage right" in str(err.value)
    assert "Azure Service Bus Data Owner" in str(err.value)
    with pytest.raises(MissingRight):
        backend.queues.names()

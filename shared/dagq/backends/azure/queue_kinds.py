"""Queue kinds an Azure store can use instead of its Storage Queues (``DAGQ_QUEUES``).

The registry (``dagq.backends.registry.QUEUE_KINDS``) names each opener here; the Azure
store calls it with a ``QueueHost``: the store's names, connection plumbing and
credential, so the queues share the store's prefix and request counter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dagq.backends.azure import clients
from dagq.backends.azure.errors import Guard
from dagq.backends.azure.naming import StoreNames, parse_queues_url
from dagq.backends.azure.servicebus import ServiceBusQueues
from dagq.backends.azure.transport import Plumbing
from dagq.backends.registry import BackendOptions

SB_SECRET = "DAGQ_SERVICEBUS_CONNECTION_STRING"


@dataclass(frozen=True)
class QueueHost:
    """What the Azure store lends the queue backend that replaces its own queues."""

    names: StoreNames
    """Physical names of the store (queue names share its prefix)."""
    plumbing: Plumbing
    """Shared transport and request counter."""
    credential: Any
    """The store's credential (``None`` when it uses a connection string)."""


def open_servicebus_queues(host: QueueHost, options: BackendOptions) -> ServiceBusQueues:
    """Task and completion queues on the Service Bus namespace ``options.queues_url``."""
    assert options.queues_url is not None
    namespace = parse_queues_url(options.queues_url)
    sb_conn = options.servicebus_connection_string
    credential = host.credential
    if sb_conn is None and credential is None:
        credential = clients.default_credential()
    client, admin = clients.servicebus_clients(namespace, sb_conn, credential)
    guard = Guard("servicebus", f"sb://{client.fully_qualified_namespace}",
                  f"DAGQ_QUEUES={options.queues_url!r}", SB_SECRET if sb_conn else None)
    return ServiceBusQueues(client, admin, host.names, guard, host.plumbing,
                            options.max_deliveries, options.lock_duration_s)

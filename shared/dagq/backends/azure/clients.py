"""Builds the SDK service clients from a connection string or a credential.

A malformed connection string, or one for a different account than ``DAGQ_STORE`` names,
is a ``ConfigError`` raised here, before any request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from azure.data.tables import TableServiceClient
from azure.servicebus import ServiceBusClient
from azure.servicebus.management import ServiceBusAdministrationClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

from dagq.backends.azure.naming import StoreNames
from dagq.backends.azure.transport import Plumbing
from dagq.errors import ConfigError

STORAGE_HELP = (
    "use 'UseDevelopmentStorage=true' for Azurite, or the string from the storage account's "
    "'Access keys' page (DefaultEndpointsProtocol=https;AccountName=...;AccountKey=...;"
    "EndpointSuffix=core.windows.net), or unset it to sign in with DefaultAzureCredential"
)
SB_RETRY: dict[str, Any] = {"retry_total": 2, "retry_backoff_factor": 0.4, "retry_backoff_max": 8}


@dataclass(frozen=True)
class StorageServices:
    """The three Storage service clients of one account."""

    blob: BlobServiceClient
    queue: QueueServiceClient
    table: TableServiceClient


def default_credential() -> Any:
    """``DefaultAzureCredential`` (environment, workload/managed identity, Azure CLI, ...)."""
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential()


def storage_clients(names: StoreNames, plumbing: Plumbing, conn: str | None,
                    credential: Any) -> StorageServices:
    """Clients for the account of ``names``, from ``conn`` when given."""
    blob_kw, queue_kw = plumbing.storage_kwargs("blob"), plumbing.storage_kwargs("queue")
    table_kw = plumbing.table_kwargs()
    if conn is None:
        return StorageServices(
            BlobServiceClient(names.endpoint("blob"), credential=credential, **blob_kw),
            QueueServiceClient(names.endpoint("queue"), credential=credential, **queue_kw),
            TableServiceClient(names.endpoint("table"), credential=credential, **table_kw),
        )
    try:
        services = StorageServices(
            BlobServiceClient.from_connection_string(conn, **blob_kw),
            QueueServiceClient.from_connection_string(conn, **queue_kw),
            TableServiceClient.from_connection_string(conn, **table_kw),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"DAGQ_STORAGE_CONNECTION_STRING is not a usable connection string ({exc}): "
            + STORAGE_HELP) from None
    account = (services.blob.account_name or "").lower()
    if account != names.account:
        raise ConfigError(
            f"DAGQ_STORAGE_CONNECTION_STRING is for storage account {account!r} but DAGQ_STORE "
            f"names account {names.account!r}: make them agree (for Azurite use "
            f"DAGQ_STORE=azure://devstoreaccount1/{names.prefix})")
    return services


def servicebus_clients(namespace: str, conn: str | None, credential: Any,
                       ) -> tuple[ServiceBusClient, ServiceBusAdministrationClient]:
    """Messaging and management clients for ``namespace``, from ``conn`` when given."""
    if conn is None:
        return (ServiceBusClient(namespace, credential, **SB_RETRY),
                ServiceBusAdministrationClient(namespace, credential))
    try:
        client = ServiceBusClient.from_connection_string(conn, **SB_RETRY)
        admin = ServiceBusAdministrationClient.from_connection_string(conn)
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"DAGQ_SERVICEBUS_CONNECTION_STRING is not a usable connection string ({exc}): "
            "copy it from the namespace's 'Shared access policies' page (Endpoint=sb://..."
            ";SharedAccessKeyName=...;SharedAccessKey=...) or unset it to sign in with "
            "DefaultAzureCredential") from None
    return client, admin

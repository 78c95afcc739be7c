"""The Azure backend: Blob Storage, Table Storage, Storage Queues or Service Bus.

``open_azure_backend("azure://ACCOUNT/PREFIX")`` signs in with ``DefaultAzureCredential``
against ``https://ACCOUNT.{blob,queue,table}.core.windows.net`` (another cloud's suffix
when the URL gives one: ``azure://ACCOUNT.core.chinacloudapi.cn/PREFIX``); with
``connection_string=`` (``DAGQ_STORAGE_CONNECTION_STRING``, e.g. ``UseDevelopmentStorage=true``
for Azurite) it uses that instead. ``queues_url="sb://NAMESPACE"`` (``DAGQ_QUEUES``) moves
task and completion queues to Service Bus, signed in with the credential or
``servicebus_connection_string=`` (``DAGQ_SERVICEBUS_CONNECTION_STRING``).

Nothing is contacted while opening: containers, tables and queues are created by the
first write that needs them, and a wrong endpoint or credential surfaces at the first
operation as ``StoreUnavailable`` naming the setting to fix. See docs/azure.md.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dagq.backends.azure import clients
from dagq.backends.azure.blob import BlobOutputs
from dagq.backends.azure.deadletter import DeadLetters
from dagq.backends.azure.errors import Guard
from dagq.backends.azure.naming import StoreNames, parse_store_url
from dagq.backends.azure.queue_kinds import QueueHost
from dagq.backends.azure.servicebus import ServiceBusQueues
from dagq.backends.azure.states import BlobStates
from dagq.backends.azure.storage_queue import StorageQueue
from dagq.backends.azure.table import TableIndex, TableRecords
from dagq.backends.azure.transport import Plumbing, pool_size_from
from dagq.backends.registry import BackendOptions, queue_kind
from dagq.errors import ConfigError
from dagq.ports import (
    Backend,
    Index,
    OutputStore,
    Queues,
    Records,
    RequestStats,
    StateStore,
)
from dagq.protocol.names import COMPLETIONS

__all__ = ["AzureBackend", "StorageQueues", "open_azure_backend"]

STORAGE_SECRET = "DAGQ_STORAGE_CONNECTION_STRING"


class StorageQueues:
    """``Queues`` on Storage Queues: ``{p}-completions`` and ``{p}-q-{name}``."""

    def __init__(self, service: Any, names: StoreNames, guard: Guard, dead: DeadLetters,
                 max_deliveries: int, pool: ThreadPoolExecutor) -> None:
        self._service = service
        self._names = names
        self._guard = guard
        self._dead = dead
        self._max = max_deliveries
        self._pool = pool
        self._queues: dict[str, StorageQueue] = {}

    def get(self, name: str) -> StorageQueue:
        """The queue called ``name``, created on the first ``get`` in this process."""
        queue = self._queues.get(name)
        if queue is None:
            client = _queue_client(self._service, self._names.queue(name))
            queue = StorageQueue(name, client, self._guard, self._dead, self._max,
                                 self._pool, framed=name != COMPLETIONS)
            queue.create()
            self._queues[name] = queue
        return queue

    def names(self) -> list[str]:
        """Logical names of existing task queues of this store."""
        with self._guard("listing queues"):
            # task queues and their priority bands (``{p}-q-``, ``{p}-h-``, ``{p}-l-``)
            found = self._service.list_queues(name_starts_with=f"{self._names.prefix}-")
            return sorted(n for n in (self._names.logical(q.name) for q in found) if n)


class AzureBackend:
    """Every port on Azure services, sharing one connection pool and request counter."""

    def __init__(self, names: StoreNames, plumbing: Plumbing, states: BlobStates,
                 index: TableIndex, queues: Queues,
                 outputs: BlobOutputs, records: TableRecords, pool: ThreadPoolExecutor) -> None:
        self.names = names
        self.states: StateStore = states
        self.index: Index = index
        self.queues: Queues = queues
        self.outputs: OutputStore = outputs
        self.records: Records = records
        self.stats: RequestStats = plumbing.stats
        self._plumbing = plumbing
        self._pool = pool

    def close(self) -> None:
        """Release threads and connections."""
        self._pool.shutdown(wait=True)
        if isinstance(self.queues, ServiceBusQueues):
            self.queues.close()
        self._plumbing.close()


def open_azure_backend(store_url: str, queues_url: str | None = None,
                       **options: Any) -> Backend:
    """Open the store ``azure://ACCOUNT/PREFIX`` (and, with ``queues_url``, its queues
    elsewhere); ``options`` are the fields of ``BackendOptions``."""
    return open_azure(store_url, BackendOptions.of(queues_url=queues_url, **options))


def open_azure(store_url: str, options: BackendOptions) -> Backend:
    """The registry's opener for ``azure://ACCOUNT/PREFIX``: Blob, Table and Storage
    Queues, or the queue kind ``options.queues_url`` names."""
    names = parse_store_url(store_url)
    pool_size = pool_size_from(options.pool_size)
    max_deliveries = options.max_deliveries
    if max_deliveries < 1:
        raise ConfigError("DAGQ_MAX_DELIVERIES must be at least 1 (e.g. 10)")
    stats = options.stats or RequestStats()
    plumbing = Plumbing(stats, pool_size=pool_size, connect_timeout=options.connect_timeout)
    conn = options.connection_string
    credential = options.credential
    if conn is None and credential is None:
        credential = clients.default_credential()
    svc = clients.storage_clients(names, plumbing, conn, credential)
    setting = f"DAGQ_STORE={store_url!r}"
    secret = STORAGE_SECRET if conn else None

    def guard(service: str, endpoint: str) -> Guard:
        return Guard(service, endpoint, setting, secret)

    blob_guard = guard("blob", svc.blob.url)
    outputs = BlobOutputs(svc.blob.get_container_client(names.outputs_container), blob_guard)
    states = BlobStates(svc.blob.get_container_client(names.state_container), blob_guard)
    table_guard = guard("table", svc.table.url)
    index = TableIndex(svc.table.get_table_client(names.index_table), table_guard)
    records = TableRecords(svc.table.get_table_client(names.records_table), table_guard)
    pool = ThreadPoolExecutor(max_workers=min(8, pool_size), thread_name_prefix="dagq-azure")
    queues: Queues
    if options.queues_url:
        opener = queue_kind(options.queues_url, store_url).load()
        queues = opener(QueueHost(names, plumbing, credential), options)
    else:
        queue_guard = guard("queue", svc.queue.url)
        dead = DeadLetters(_queue_client(svc.queue, names.deadletter_queue), queue_guard,
                           outputs, pool)
        queues = StorageQueues(svc.queue, names, queue_guard, dead, max_deliveries, pool)
    return AzureBackend(names, plumbing, states, index, queues, outputs, records, pool)


def _queue_client(service: Any, name: str) -> Any:
    from azure.storage.queue import BinaryBase64DecodePolicy, BinaryBase64EncodePolicy

    return service.get_queue_client(name, message_encode_policy=BinaryBase64EncodePolicy(),
                                    message_decode_policy=BinaryBase64DecodePolicy())

"""The backend registry: each store URL scheme and queue URL scheme maps to one opener.

``DAGQ_STORE`` picks a store kind by its scheme (``sqlite:``, ``azure://``); ``DAGQ_QUEUES``
optionally picks a queue kind (``sb://``) that replaces the store's own queues. Openers
live in their backend's module and are imported only when chosen, so the registry itself
costs nothing to import (``Settings`` validates URLs against it at start-up).

Adding a queue backend: one module with an opener, one line in ``QUEUE_KINDS``, one
contract-suite factory in tests/contract/factories.py.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from dagq.errors import ConfigError
from dagq.ports import Backend, RequestStats

STORE_EXAMPLES = "e.g. DAGQ_STORE=sqlite:.dagq/dagq.db or DAGQ_STORE=azure://myaccount/dagq"


@dataclass(frozen=True)
class BackendOptions:
    """Options every opener receives; each kind reads the ones that concern it."""

    queues_url: str | None = None
    """``DAGQ_QUEUES``: a queue URL whose kind replaces the store's own queues."""
    max_deliveries: int = 10
    """Deliveries before a message is dead-lettered."""
    connection_string: str | None = None
    """Storage connection string instead of a credential (e.g. Azurite)."""
    servicebus_connection_string: str | None = None
    """Service Bus connection string instead of a credential."""
    credential: Any = None
    """An azure-identity credential instead of ``DefaultAzureCredential``."""
    pool_size: int = 16
    """HTTP connections per Azure service client (``DAGQ_POOL_SIZE``)."""
    connect_timeout: float = 3.0
    """Seconds to wait for an Azure connection."""
    lock_duration_s: float = 60.0
    """Lock duration of the Service Bus queues dagq creates."""
    stats: RequestStats | None = None
    """A request counter to count into (a new one if unset)."""

    @classmethod
    def of(cls, **options: Any) -> BackendOptions:
        """Options from keywords; ``None`` values keep the default, unknown names fail."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"unknown backend option(s) {', '.join(unknown)}; "
                            f"known: {', '.join(sorted(known))}")
        return cls(**{k: v for k, v in options.items() if v is not None})


StoreOpener = Callable[[str, BackendOptions], Backend]


@dataclass(frozen=True)
class Kind:
    """One URL scheme and the module attribute that opens it."""

    prefix: str
    """What a URL of this kind starts with."""
    opener: str
    """``module:function`` of the opener, imported when first used."""
    example: str
    """A URL of this kind, for error messages."""
    extra: str | None = None
    """The pip extra whose packages the opener needs (named when one is missing)."""

    def load(self) -> Callable[..., Any]:
        """The opener function (``ConfigError`` when its optional packages are missing)."""
        module, _, attr = self.opener.partition(":")
        try:
            loaded = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if self.extra is None or (e.name or "").startswith("dagq"):
                raise
            raise ConfigError(
                f"a {self.prefix} URL needs the {self.extra} extra ({e.name} is missing); "
                f"install it with: pip install 'dagq[{self.extra}]'") from e
        opener: Callable[..., Any] = getattr(loaded, attr)
        return opener


STORE_KINDS: tuple[Kind, ...] = (
    Kind("sqlite:", "dagq.backends.sqlite.backend:open_sqlite_backend", "sqlite:.dagq/dagq.db"),
    Kind("azure://", "dagq.backends.azure:open_azure", "azure://myaccount/dagq",
         extra="azure"),
)
"""Store kinds by URL prefix (``DAGQ_STORE``)."""

QUEUE_KINDS: tuple[Kind, ...] = (
    Kind("sb://", "dagq.backends.azure.queue_kinds:open_servicebus_queues", "sb://my-namespace",
         extra="azure"),
)
"""Queue kinds by URL prefix (``DAGQ_QUEUES``); they need a store that hosts them."""

QUEUE_HOSTS = frozenset({"azure://"})
"""Store kinds whose queues a ``QUEUE_KINDS`` backend may replace."""


def store_kind(store_url: str) -> Kind:
    """The kind of ``store_url``; ``ConfigError`` naming ``DAGQ_STORE`` if none matches."""
    url = store_url.strip()
    for kind in STORE_KINDS:
        if url.startswith(kind.prefix):
            return kind
    schemes = " or ".join(f"'{k.prefix}...'" for k in STORE_KINDS)
    raise ConfigError(f"DAGQ_STORE={store_url!r} is not a store URL; use {schemes}, "
                      f"{STORE_EXAMPLES}")


def queue_kind(queues_url: str, store_url: str) -> Kind:
    """The kind of ``queues_url`` (``DAGQ_QUEUES``), checked against the store's kind."""
    for kind in QUEUE_KINDS:
        if queues_url.startswith(kind.prefix):
            break
    else:
        raise ConfigError(
            f"DAGQ_QUEUES={queues_url!r} is not a queue URL: use "
            + " or ".join(f"'{k.prefix}NAMESPACE' (e.g. {k.example})" for k in QUEUE_KINDS)
            + " or leave it unset to keep queues in the store")
    if store_kind(store_url).prefix not in QUEUE_HOSTS:
        raise ConfigError(
            f"DAGQ_QUEUES={queues_url!r} needs an Azure store, but DAGQ_STORE={store_url!r}"
            " is not one; unset DAGQ_QUEUES or use DAGQ_STORE=azure://ACCOUNT/PREFIX")
    return kind


def check_urls(store_url: str, queues_url: str | None) -> None:
    """Raise ``ConfigError`` when either URL names no registered kind (no import, no I/O)."""
    store_kind(store_url)
    if queues_url:
        queue_kind(queues_url, store_url)


def open_backend(store_url: str, *, queues_url: str | None = None, **options: Any) -> Backend:
    """The backend ``store_url`` (the ``DAGQ_STORE`` value) names.

    ``queues_url`` (``DAGQ_QUEUES``) moves the queues to another service; ``options`` are
    the fields of :class:`BackendOptions`.
    """
    check_urls(store_url, queues_url)
    opts = BackendOptions.of(queues_url=queues_url or None, **options)
    opener: StoreOpener = store_kind(store_url).load()
    return opener(store_url.strip(), opts)

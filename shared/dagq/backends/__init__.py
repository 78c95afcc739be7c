"""Storage backends and ``open_backend``, which builds one from ``DAGQ_STORE``.

``sqlite:PATH`` opens the embedded SQLite store (``sqlite:///abs/path`` also works);
``azure://ACCOUNT/PREFIX`` opens the Azure adapters (imported only when asked for).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from dagq.errors import ConfigError
from dagq.ports import Backend

_EXAMPLES = "e.g. DAGQ_STORE=sqlite:.dagq/dagq.db or DAGQ_STORE=azure://myaccount/dagq"


def sqlite_path(store_url: str) -> str:
    """The file path of a ``sqlite:`` store URL; raises ``ConfigError`` if it has none."""
    rest = store_url[len("sqlite:"):]
    path = rest[2:] if rest.startswith("//") else rest
    if not path or path == ":memory:":
        raise ConfigError(
            f"DAGQ_STORE={store_url!r} names no database file; give a path, {_EXAMPLES}"
        )
    return path


def open_backend(store_url: str, *, queues_url: str | None = None, **options: Any) -> Backend:
    """The backend ``store_url`` (the ``DAGQ_STORE`` value) names.

    ``queues_url`` (``DAGQ_QUEUES``) moves the queues elsewhere; only Azure stores
    support it. ``options`` are backend settings (e.g. ``max_deliveries``); those the
    chosen backend does not take are ignored, so callers may pass one set for all.
    """
    url = store_url.strip()
    if url.startswith("sqlite:"):
        if queues_url:
            raise ConfigError(
                f"DAGQ_QUEUES={queues_url!r} needs an Azure store, but DAGQ_STORE={store_url!r}"
                " is SQLite; unset DAGQ_QUEUES or use DAGQ_STORE=azure://ACCOUNT/PREFIX"
            )
        from dagq.backends.sqlite import SqliteBackend

        accepted = inspect.signature(SqliteBackend).parameters
        kwargs = {k: v for k, v in options.items() if k in accepted and v is not None}
        return SqliteBackend(sqlite_path(url), **kwargs)
    if url.startswith("azure://"):
        try:
            azure = importlib.import_module("dagq.backends.azure")
        except ModuleNotFoundError as e:
            if not (e.name or "").startswith("azure"):
                raise
            raise ConfigError(
                f"DAGQ_STORE={store_url!r} needs the Azure SDK ({e.name} is missing); "
                "install it with: pip install 'dagq[azure]'"
            ) from e
        backend: Backend = azure.open_azure_backend(url, queues_url, **options)
        return backend
    raise ConfigError(
        f"DAGQ_STORE={store_url!r} is not a store URL; use sqlite:PATH or "
        f"azure://ACCOUNT/PREFIX, {_EXAMPLES}"
    )

"""Builds backends from settings: the one place that maps ``Settings`` to backend options."""

from __future__ import annotations

from dagq.backends.registry import open_backend
from dagq.config import Settings
from dagq.ports import Backend


def backend_from_settings(settings: Settings) -> Backend:
    """Open the backend ``settings`` describe (``ConfigError``/``StoreUnavailable`` if not)."""
    options: dict[str, object] = {"max_deliveries": settings.max_deliveries,
                                  "pool_size": settings.pool_size}
    if settings.storage_connection_string:
        options["connection_string"] = settings.storage_connection_string
    if settings.servicebus_connection_string:
        options["servicebus_connection_string"] = settings.servicebus_connection_string
    return open_backend(settings.store, queues_url=settings.queues, **options)

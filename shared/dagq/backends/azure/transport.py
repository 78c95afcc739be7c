"""The HTTP plumbing every Storage client of one backend shares.

One ``requests`` session with a bounded connection pool (``DAGQ_POOL_SIZE``) carries the
Blob, Queue and Table clients; short connect timeouts and few connection retries make a
wrong endpoint fail within seconds, while throttling (429/503) and transient errors are
retried with exponential back-off. A request hook counts every HTTP request (each retry
included, as the service bills them) in the backend's ``RequestStats`` by kind.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import requests
from azure.core.exceptions import AzureError, ClientAuthenticationError
from azure.core.pipeline import PipelineRequest, PipelineResponse
from azure.core.pipeline.transport import RequestsTransport
from azure.storage.blob import ExponentialRetry
from requests.adapters import HTTPAdapter

from dagq.errors import ConfigError
from dagq.ports import RequestStats

DEFAULT_POOL_SIZE = 16


class StorageRetry(ExponentialRetry):
    """Back-off of about 0.5, 1, 2, 4 s (jittered) between up to four retries; a failed
    sign-in is not retried (another attempt would fail the same way)."""

    def get_backoff_time(self, settings: dict[str, Any]) -> float:
        """Seconds to wait before the next attempt."""
        exponent = max(int(settings["count"]) - 1, 0)
        return min(4.0, 0.5 * float(2**exponent)) * random.uniform(0.75, 1.25)

    def increment(self, settings: dict[str, Any], request: Any,
                  response: PipelineResponse[Any, Any] | None = None,
                  error: AzureError | None = None) -> bool:
        """Count an attempt; ``False`` ends the retries."""
        if isinstance(error, ClientAuthenticationError):
            return False
        return bool(super().increment(settings, request, response, error))


def pool_size_from(value: object) -> int:
    """The connection pool size option (``DAGQ_POOL_SIZE``), checked."""
    raw = DEFAULT_POOL_SIZE if value is None else value
    try:
        size = int(str(raw))
    except ValueError:
        size = 0
    if size < 1:
        raise ConfigError(f"DAGQ_POOL_SIZE={raw!r} must be a positive integer "
                          f"(e.g. DAGQ_POOL_SIZE={DEFAULT_POOL_SIZE})")
    return size


@dataclass
class Plumbing:
    """Shared session, transport and request counter of one backend."""

    stats: RequestStats
    pool_size: int = DEFAULT_POOL_SIZE
    connect_timeout: float = 3.0
    read_timeout: float = 60.0
    session: requests.Session = field(init=False)
    transport: RequestsTransport = field(init=False)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.session = requests.Session()
        adapter = HTTPAdapter(pool_connections=8, pool_maxsize=self.pool_size,
                              pool_block=True, max_retries=0)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.transport = RequestsTransport(
            session=self.session, session_owner=False,
            connection_timeout=self.connect_timeout, read_timeout=self.read_timeout,
        )

    def storage_kwargs(self, service: str) -> dict[str, Any]:
        """Keyword arguments for a Blob or Queue service client."""
        return {
            "transport": self.transport,
            "retry_policy": StorageRetry(retry_total=4, retry_connect=1, retry_read=1),
            "raw_request_hook": self._hook(service),
        }

    def table_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for a Table service client."""
        return {
            "transport": self.transport,
            "retry_total": 4, "retry_connect": 1, "retry_read": 1,
            "retry_backoff_factor": 0.5, "retry_backoff_max": 8,
            "raw_request_hook": self._hook("table"),
        }

    def count(self, kind: str, n: int = 1) -> None:
        """Record ``n`` requests of ``kind`` (thread-safe)."""
        with self._lock:
            self.stats.add(kind, n)

    def close(self) -> None:
        """Close every pooled connection."""
        self.session.close()

    def _hook(self, service: str) -> Any:
        def hook(request: PipelineRequest[Any]) -> None:
            http = request.http_request
            self.count(classify(service, http.method, http.url))
        return hook


def classify(service: str, method: str, url: str) -> str:
    """The request kind (``blob.read``, ``queue.send``, ...) of one HTTP request."""
    parts = urlsplit(url)
    path, query, method = parts.path, parts.query.lower(), method.upper()
    if service == "blob":
        if "restype=container" in query:
            return "blob.read" if "comp=list" in query else "blob.setup"
        return {"GET": "blob.read", "HEAD": "blob.read", "DELETE": "blob.delete"}.get(
            method, "blob.write")
    if service == "queue":
        if path.endswith("/messages"):
            if method == "POST":
                return "queue.send"
            if method == "GET":
                return "queue.read" if "peekonly=true" in query else "queue.receive"
            return "queue.delete"
        if "/messages/" in path:
            return "queue.delete" if method == "DELETE" else "queue.update"
        return "queue.read" if method == "GET" else "queue.setup"
    if "/Tables" in path:
        return "table.setup"
    return "table.read" if method == "GET" else "table.write"

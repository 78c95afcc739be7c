"""Serve a Function App's HTTP functions on loopback for a real browser or HTTP client,
through the same local host `dagq serve` uses (routes read from the app)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import azure.functions as func

from dagq.functions.local_host import LocalHost, http_routes, make_local_server


@contextmanager
def serve(app: func.FunctionApp) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 (a free port) in a thread; yields the base URL."""
    server = make_local_server(LocalHost(http_routes(app)), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()

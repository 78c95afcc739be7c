"""Registers an HTTP function for one endpoint of the wire contract.

Every HTTP function of the app is registered here, under the name, method and route its
``dagq.protocol.http.Endpoint`` gives, with the app's auth level and identity guard, and
with every failure answered as JSON (``dagq.functions.errors.answer``). The routes the
remote client calls and the ones the host serves are therefore the same table.
"""

from __future__ import annotations

from collections.abc import Callable

import azure.functions as func

from dagq.functions.errors import answer
from dagq.functions.http_auth import http_auth_level, identity_guard
from dagq.functions.runtime import Runtime
from dagq.protocol.http import Endpoint

Handler = Callable[[func.HttpRequest], func.HttpResponse]
"""What answers one request of an endpoint."""


class Routes:
    """Registers endpoints on one blueprint with the auth of ``runtime``'s settings."""

    def __init__(self, bp: func.Blueprint, runtime: Runtime) -> None:
        self.bp = bp
        self.auth = http_auth_level(runtime.env)
        self.guard = identity_guard(runtime.env)

    def add(self, endpoint: Endpoint, handler: Handler) -> None:
        """Register ``handler`` as the function of ``endpoint``."""
        def function(req: func.HttpRequest) -> func.HttpResponse:
            return answer(lambda: handler(req))

        function.__name__ = function.__qualname__ = endpoint.name
        guarded = self.guard(function)
        routed = self.bp.route(route=endpoint.route, methods=[endpoint.method],
                               auth_level=self.auth)(guarded)
        self.bp.function_name(endpoint.name)(routed)

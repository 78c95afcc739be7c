"""Maps dagq errors to HTTP responses: JSON ``{"error", "code", "details"}``.

Which exception is answered with which status and code is one table,
``dagq.protocol.http.ERRORS``, which the remote client reads back. Bad input is always a
4xx (400 invalid, 404 unknown id, 409 id conflict or nothing to cancel/retry (with the
workflow's ``status``), 413 too large, 415 wrong content type). 5xx is reserved for the
server's side: 503 when the store cannot be reached, 500 for a bad app setting or a bug
(logged with its traceback).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import azure.functions as func

from dagq.protocol.http import (
    CONFIGURATION,
    INTERNAL,
    STORE_UNAVAILABLE,
    ErrorKind,
    WireError,
    wire_error,
)

log = logging.getLogger("dagq.functions.http")

JSON_TYPE = "application/json"


class ApiError(Exception):
    """An error answer: its kind (HTTP status and stable code), a message and details."""

    def __init__(self, kind: ErrorKind, message: str, details: list[Any] | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.wire = WireError(kind, message, details or [], extra or {})

    @property
    def status(self) -> int:
        """The HTTP status."""
        return self.wire.kind.status

    @property
    def code(self) -> str:
        """The stable error code."""
        return self.wire.kind.code

    def response(self) -> func.HttpResponse:
        """The JSON response for this error."""
        return error_response(self.wire)


def json_response(body: Any, status: int = 200,
                  headers: dict[str, str] | None = None) -> func.HttpResponse:
    """``body`` as a UTF-8 JSON response."""
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    return func.HttpResponse(data, status_code=status, headers=headers, mimetype=JSON_TYPE,
                             charset="utf-8")


def error_response(error: WireError, headers: dict[str, str] | None = None
                   ) -> func.HttpResponse:
    """The JSON response of an error answer."""
    return json_response(error.body(), error.kind.status, headers)


def to_api_error(exc: Exception) -> ApiError:
    """The ``ApiError`` answering ``exc``."""
    if isinstance(exc, ApiError):
        return exc
    wire = wire_error(exc)
    if wire is None:
        log.error("unexpected error while handling a request", exc_info=exc)
        return ApiError(INTERNAL, "internal error; the function app's log has the details")
    if wire.kind is STORE_UNAVAILABLE:
        log.error("store unavailable: %s", exc)
    elif wire.kind is CONFIGURATION:
        log.error("bad app setting: %s", exc)
        return ApiError(CONFIGURATION, f"the function app is misconfigured: {exc}")
    return ApiError(wire.kind, wire.message, wire.details, wire.extra)


def answer(handler: Callable[[], func.HttpResponse]) -> func.HttpResponse:
    """Run ``handler``; every failure becomes a JSON answer by ``to_api_error``, never a
    bare 500 from the host."""
    try:
        return handler()
    except Exception as exc:
        return to_api_error(exc).response()

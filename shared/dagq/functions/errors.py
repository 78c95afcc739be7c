"""Maps dagq errors to HTTP responses: JSON ``{"error", "code", "details"}``.

Bad input is always a 4xx (400 invalid, 404 unknown id, 409 id conflict or nothing to
cancel/retry (with the workflow's ``status``), 413 too large,
415 wrong content type). 5xx is reserved for the server's side: 503 when the store
cannot be reached, 500 for a bad app setting or a bug (logged with its traceback).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import azure.functions as func

from dagq.errors import (
    ConfigError,
    CronError,
    DefinitionError,
    IdConflict,
    ScheduleExists,
    ScheduleNotFound,
    StoreUnavailable,
    TaskError,
    WorkflowFinished,
    WorkflowNotFound,
)

log = logging.getLogger("dagq.functions.http")

JSON_TYPE = "application/json"


class ApiError(Exception):
    """An error answer: HTTP status, a stable code, a message and a list of details."""

    def __init__(self, status: int, code: str, message: str,
                 details: list[Any] | None = None, extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or []
        self.extra = extra or {}

    def response(self) -> func.HttpResponse:
        """The JSON response for this error."""
        body = {"error": self.message, "code": self.code, "details": self.details,
                **self.extra}
        return json_response(body, self.status)


def json_response(body: Any, status: int = 200,
                  headers: dict[str, str] | None = None) -> func.HttpResponse:
    """``body`` as a UTF-8 JSON response."""
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    return func.HttpResponse(data, status_code=status, headers=headers, mimetype=JSON_TYPE,
                             charset="utf-8")


def to_api_error(exc: Exception) -> ApiError:
    """The ``ApiError`` answering ``exc``."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, DefinitionError):
        where = f" in {exc.source}" if exc.source else ""
        return ApiError(400, "invalid_definition",
                        f"the workflow definition{where} has {len(exc.problems)} problem(s)",
                        [p.to_json() for p in exc.problems])
    if isinstance(exc, WorkflowNotFound | ScheduleNotFound):
        return ApiError(404, "not_found", str(exc))
    if isinstance(exc, ScheduleExists):
        return ApiError(409, "schedule_exists", str(exc))
    if isinstance(exc, CronError):
        return ApiError(400, "invalid_schedule", str(exc))
    if isinstance(exc, IdConflict):
        return ApiError(409, "id_conflict", str(exc))
    if isinstance(exc, WorkflowFinished):
        return ApiError(409, "finished", str(exc),
                        extra={"id": exc.workflow_id, "status": exc.status})
    if isinstance(exc, TaskError):
        return ApiError(400, "task_error", str(exc))
    if isinstance(exc, StoreUnavailable):
        log.error("store unavailable: %s", exc)
        return ApiError(503, "store_unavailable", str(exc))
    if isinstance(exc, ConfigError):
        log.error("bad app setting: %s", exc)
        return ApiError(500, "configuration", f"the function app is misconfigured: {exc}")
    log.error("unexpected error while handling a request", exc_info=exc)
    return ApiError(500, "internal", "internal error; the function app's log has the details")


def answer(handler: Callable[[], func.HttpResponse]) -> func.HttpResponse:
    """Run ``handler``; every failure becomes a JSON answer by ``to_api_error``, never a
    bare 500 from the host."""
    try:
        return handler()
    except Exception as exc:
        return to_api_error(exc).response()

"""The HTTP API's wire contract: routes, headers, limits and error kinds, for both ends.

The server (``dagq.functions``: the Function App and ``dagq serve``) and the client
(``dagq.remote``) take every name they share from here, so the two cannot drift apart:

- ``Endpoint``: each HTTP function's name, method, route template (what the blueprints
  register, relative to ``/api``) and OpenAPI ``operationId``; ``Endpoint.path`` fills a
  template the way the client sends it;
- the ``X-Dagq-*`` headers of a log read, the key header, and the limits a request has;
- ``ERRORS``: one table of error kinds, each an HTTP status, a stable ``code`` and the
  ``DagqError`` class it stands for. The server answers an exception with the first kind
  whose class it is an instance of (``wire_error``); the client raises that class again
  from the code (``raised_error``), so over HTTP a caller catches what ``WorkflowClient``
  raises in-process. Kinds without a class are refusals of the HTTP layer itself (a bad
  query parameter, a missing key); the client raises ``RemoteError`` for them.

Nothing here does I/O or knows Azure Functions or httpx.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from dagq.errors import (
    ConfigError,
    CronError,
    DagqError,
    DefinitionError,
    IdConflict,
    NotFound,
    Problem,
    ScheduleExists,
    ScheduleNotFound,
    StoreUnavailable,
    TaskError,
    WorkflowFinished,
    WorkflowNotFound,
)

PREFIX = "/api"
"""The route prefix (``extensions.http.routePrefix`` of host.json)."""


def segment(value: str) -> str:
    """``value`` as one URL path segment that no client or proxy rewrites: every reserved
    character is percent-encoded, and so are the dot segments ``.`` and ``..`` (RFC 3986
    removes them)."""
    if value in (".", ".."):
        return "%2E" * len(value)
    return quote(value, safe="")


@dataclass(frozen=True)
class Endpoint:
    """One HTTP function of the API."""

    name: str
    """The function's name (``function_name`` of its registration)."""
    method: str
    """Its HTTP method."""
    route: str
    """Its route template below ``/api``: ``{name}`` is one segment, a final ``{*name}``
    the rest of the path."""
    operation: str
    """Its ``operationId`` in openapi.json."""

    def path(self, **values: str) -> str:
        """The URL path below the API root for these route values, each percent-encoded
        as one segment (a catch-all value segment by segment): ``/workflows/w/tasks/a%2Fb``."""
        parts: list[str] = []
        for part in self.route.split("/"):
            if part.startswith("{*"):
                parts.extend(segment(s) for s in values[part[2:-1]].split("/"))
            elif part.startswith("{"):
                parts.append(segment(values[part[1:-1]]))
            else:
                parts.append(part)
        return "/" + "/".join(parts)


# -- workflows ------------------------------------------------------------------------
SUBMIT = Endpoint("submit_workflow", "POST", "workflows", "submitWorkflow")
VALIDATE = Endpoint("validate_workflow", "POST", "workflows/validate", "validateWorkflow")
LIST_WORKFLOWS = Endpoint("list_workflows", "GET", "workflows", "listWorkflows")
GET_WORKFLOW = Endpoint("get_workflow", "GET", "workflows/{id}", "getWorkflow")
CANCEL = Endpoint("cancel_workflow", "POST", "workflows/{id}/cancel", "cancelWorkflow")
RETRY = Endpoint("retry_workflow", "POST", "workflows/{id}/retry", "retryWorkflow")
SUSPEND = Endpoint("suspend_workflow", "POST", "workflows/{id}/suspend", "suspendWorkflow")
RESUME = Endpoint("resume_workflow", "POST", "workflows/{id}/resume", "resumeWorkflow")
GRAPH = Endpoint("workflow_graph", "GET", "workflows/{id}/graph", "workflowGraph")
EXPLAIN = Endpoint("workflow_explain", "GET", "workflows/{id}/explain", "explainWorkflow")
# -- tasks ----------------------------------------------------------------------------
LIST_TASKS = Endpoint("list_tasks", "GET", "workflows/{id}/tasks", "listTasks")
GET_TASK = Endpoint("get_task", "GET", "workflows/{id}/tasks/{task}", "getTask")
TASK_LOGS = Endpoint("task_logs", "GET", "workflows/{id}/tasks/{task}/logs", "getTaskLogs")
TASK_OUTPUT = Endpoint("task_output", "GET", "workflows/{id}/tasks/{task}/output",
                       "getTaskOutput")
TASK_FILES = Endpoint("task_files", "GET", "workflows/{id}/tasks/{task}/files",
                      "listTaskFiles")
TASK_FILE = Endpoint("task_file", "GET", "workflows/{id}/tasks/{task}/files/{*path}",
                     "getTaskFile")
# -- schedules ------------------------------------------------------------------------
LIST_SCHEDULES = Endpoint("list_schedules", "GET", "schedules", "listSchedules")
ADD_SCHEDULE = Endpoint("add_schedule", "POST", "schedules", "addSchedule")
GET_SCHEDULE = Endpoint("get_schedule", "GET", "schedules/{name}", "getSchedule")
REMOVE_SCHEDULE = Endpoint("remove_schedule", "DELETE", "schedules/{name}", "removeSchedule")
UPDATE_SCHEDULE = Endpoint("update_schedule", "PATCH", "schedules/{name}", "updateSchedule")
PAUSE_SCHEDULE = Endpoint("pause_schedule", "POST", "schedules/{name}/pause", "pauseSchedule")
RESUME_SCHEDULE = Endpoint("resume_schedule", "POST", "schedules/{name}/resume",
                           "resumeSchedule")
TRIGGER_SCHEDULE = Endpoint("trigger_schedule", "POST", "schedules/{name}/trigger",
                            "triggerSchedule")
BACKFILL_SCHEDULE = Endpoint("backfill_schedule", "POST", "schedules/{name}/backfill",
                             "backfillSchedule")
# -- the app --------------------------------------------------------------------------
HEALTH = Endpoint("health", "GET", "health", "health")
OPENAPI = Endpoint("openapi", "GET", "openapi.json", "openapi")
STATUS_PAGE = Endpoint("status_page", "GET", "status", "statusPage")

ENDPOINTS: tuple[Endpoint, ...] = (
    SUBMIT, VALIDATE, LIST_WORKFLOWS, GET_WORKFLOW, CANCEL, RETRY, SUSPEND, RESUME, GRAPH,
    EXPLAIN,
    LIST_TASKS, GET_TASK, TASK_LOGS, TASK_OUTPUT, TASK_FILES, TASK_FILE,
    LIST_SCHEDULES, ADD_SCHEDULE, GET_SCHEDULE, REMOVE_SCHEDULE, UPDATE_SCHEDULE,
    PAUSE_SCHEDULE, RESUME_SCHEDULE, TRIGGER_SCHEDULE, BACKFILL_SCHEDULE,
    HEALTH, OPENAPI, STATUS_PAGE,
)
"""Every HTTP function the app registers (and nothing else)."""

# -- headers and limits ---------------------------------------------------------------
KEY_HEADER = "x-functions-key"
"""The header carrying a function key (or the ``code`` query parameter, ``KEY_QUERY``)."""
KEY_QUERY = "code"
"""The query parameter carrying a function key (what the status page sends)."""
ATTEMPT_HEADER = "X-Dagq-Attempt"
"""Of a log read: the attempt read."""
NEXT_OFFSET_HEADER = "X-Dagq-Next-Offset"
"""Of a log read: the ``offset`` to ask for next."""
FINISHED_HEADER = "X-Dagq-Finished"
"""Of a log read: ``true`` once the attempt can print nothing more."""
MD5_HEADER = "Content-MD5"
"""Of a synced file: the base64 MD5 of its bytes."""

DEFAULT_PAGE = 100
"""Workflows per listing page when ``limit`` is not given."""
MAX_PAGE = 1000
"""The most workflows one listing page holds."""
MAX_WAIT_S = 200
"""The longest ``?wait=`` of ``GET /workflows/{id}``: an HTTP-triggered function must
answer within 230 s whatever ``functionTimeout`` says (Azure Load Balancer idle timeout;
see https://github.com/MicrosoftDocs/azure-docs/blob/master/includes/functions-timeout-duration.md),
so a bounded wait ends well before that; longer waits are several requests."""


def log_headers(attempt: int, next_offset: int, finished: bool) -> dict[str, str]:
    """The headers of a log read."""
    return {ATTEMPT_HEADER: str(attempt), NEXT_OFFSET_HEADER: str(next_offset),
            FINISHED_HEADER: "true" if finished else "false"}


def log_position(headers: Mapping[str, str]) -> tuple[int, int, bool]:
    """``(attempt, next_offset, finished)`` from the headers of a log read."""
    return (int(headers[ATTEMPT_HEADER]), int(headers[NEXT_OFFSET_HEADER]),
            headers.get(FINISHED_HEADER) == "true")


@dataclass(frozen=True)
class Submitted:
    """Result of a submission (what ``POST /workflows`` answers)."""

    id: str
    """Workflow id."""
    created: bool
    """False when an identical workflow with this id already existed."""


# -- errors ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ErrorKind:
    """One kind of error answer: ``{"error": message, "code": code, "details": [...]}``."""

    code: str
    """Stable, machine-readable name of the kind."""
    status: int
    """The HTTP status it is answered with."""
    error: type[DagqError] | None = None
    """The exception it stands for on both ends (None: a refusal of the HTTP layer)."""


INVALID_DEFINITION = ErrorKind("invalid_definition", 400, DefinitionError)
INVALID_SCHEDULE = ErrorKind("invalid_schedule", 400, CronError)
TASK_ERROR = ErrorKind("task_error", 400, TaskError)
NOT_FOUND = ErrorKind("not_found", 404, WorkflowNotFound)
SCHEDULE_NOT_FOUND = ErrorKind("schedule_not_found", 404, ScheduleNotFound)
FILE_NOT_FOUND = ErrorKind("file_not_found", 404, NotFound)
ID_CONFLICT = ErrorKind("id_conflict", 409, IdConflict)
SCHEDULE_EXISTS = ErrorKind("schedule_exists", 409, ScheduleExists)
FINISHED = ErrorKind("finished", 409, WorkflowFinished)
CONFIGURATION = ErrorKind("configuration", 500, ConfigError)
STORE_UNAVAILABLE = ErrorKind("store_unavailable", 503, StoreUnavailable)
BAD_PARAMETER = ErrorKind("bad_parameter", 400)
BAD_REQUEST = ErrorKind("bad_request", 400)
BAD_JSON = ErrorKind("bad_json", 400)
EMPTY_BODY = ErrorKind("empty_body", 400)
UNAUTHORIZED = ErrorKind("unauthorized", 401)
ORIGIN_NOT_ALLOWED = ErrorKind("origin_not_allowed", 403)
METHOD_NOT_ALLOWED = ErrorKind("method_not_allowed", 405)
TOO_LARGE = ErrorKind("too_large", 413)
UNSUPPORTED_MEDIA_TYPE = ErrorKind("unsupported_media_type", 415)
HOST_NOT_ALLOWED = ErrorKind("host_not_allowed", 421)
INTERNAL = ErrorKind("internal", 500)

ERRORS: tuple[ErrorKind, ...] = (
    INVALID_DEFINITION, INVALID_SCHEDULE, TASK_ERROR, NOT_FOUND, SCHEDULE_NOT_FOUND,
    FILE_NOT_FOUND, ID_CONFLICT, SCHEDULE_EXISTS, FINISHED, CONFIGURATION, STORE_UNAVAILABLE,
    BAD_PARAMETER, BAD_REQUEST, BAD_JSON, EMPTY_BODY, UNAUTHORIZED, ORIGIN_NOT_ALLOWED,
    METHOD_NOT_ALLOWED, TOO_LARGE, UNSUPPORTED_MEDIA_TYPE, HOST_NOT_ALLOWED, INTERNAL,
)
"""Every error answer the server gives. No class is a subclass of another's, so the
kind of an exception does not depend on the order."""
BY_CODE: dict[str, ErrorKind] = {kind.code: kind for kind in ERRORS}


@dataclass(frozen=True)
class WireError:
    """An error answer: its kind, message, details and extra top-level fields."""

    kind: ErrorKind
    message: str
    details: list[Any] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        """The JSON object sent."""
        return {"error": self.message, "code": self.kind.code, "details": self.details,
                **self.extra}


def kind_of(exc: BaseException) -> ErrorKind | None:
    """The kind answering ``exc``; None when no kind's class describes it."""
    for kind in ERRORS:
        if kind.error is not None and isinstance(exc, kind.error):
            return kind
    return None


def wire_error(exc: BaseException) -> WireError | None:
    """How ``exc`` travels: an invalid definition lists each problem in ``details``, a
    finished workflow adds its ``id`` and ``status``; None for an exception no kind
    describes (an internal error)."""
    kind = kind_of(exc)
    if kind is None:
        return None
    if isinstance(exc, DefinitionError):
        where = f" in {exc.source}" if exc.source else ""
        return WireError(kind, f"the workflow definition{where} has {len(exc.problems)} "
                         "problem(s)", [p.to_json() for p in exc.problems])
    if isinstance(exc, WorkflowFinished):
        return WireError(kind, str(exc), extra={"id": exc.workflow_id, "status": exc.status})
    return WireError(kind, str(exc))


_PROBLEM_FIELDS = ("message", "task", "field", "line", "column")


def problem_of(detail: Any) -> Problem:
    """A ``Problem`` from one ``details`` entry of an ``invalid_definition`` answer."""
    if not isinstance(detail, dict):
        return Problem(str(detail))
    return Problem(**{k: detail[k] for k in _PROBLEM_FIELDS if k in detail})


def raised_error(body: Mapping[str, Any]) -> DagqError | None:
    """The exception an error answer's body stands for, with the server's message; None
    when its code names no exception class (the client then raises ``RemoteError``)."""
    kind = BY_CODE.get(str(body.get("code") or ""))
    if kind is None or kind.error is None:
        return None
    message = str(body.get("error", ""))
    if kind.error is DefinitionError:
        raw = body.get("details")
        details = raw if isinstance(raw, list) else []
        return DefinitionError([problem_of(d) for d in details] or [Problem(message)])
    if kind.error is WorkflowFinished:
        return WorkflowFinished(message, str(body.get("id", "")), str(body.get("status", "")))
    return kind.error(message)

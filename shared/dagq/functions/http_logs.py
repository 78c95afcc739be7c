"""HTTP handlers for one task: its detail (attempt history) and its stored log.

``GET /workflows/{id}/tasks/{task}/logs?attempt=&offset=&limit=&follow=`` answers the
log as ``text/plain`` bytes from ``offset``, with headers a client needs to follow a
running attempt: ``X-Dagq-Attempt``, ``X-Dagq-Next-Offset`` (ask for that next) and
``X-Dagq-Finished`` (``true`` once the attempt can print nothing more; one more read
after it returns the rest). ``follow=true`` leaves out the tail of a capped attempt that
is still running, which changes as it runs, so that offsets stay valid.
``GET /workflows/{id}/tasks/{task}`` answers the task with its ``attempts`` and its
``explanation``, the JSON ``dagq task ID TASK --json`` prints (the status page's task
panel reads it too).
"""

from __future__ import annotations

import azure.functions as func

from dagq.functions.errors import ApiError, json_response
from dagq.functions.http_io import choice_param, int_param
from dagq.functions.runtime import Runtime
from dagq.protocol.http import BAD_PARAMETER, log_headers

DEFAULT_LIMIT = 4 * 1024 * 1024
MAX_LIMIT = 16 * 1024 * 1024


def _route(req: func.HttpRequest) -> tuple[str, str]:
    workflow_id = str(req.route_params.get("id") or "")
    task = str(req.route_params.get("task") or "")
    if not workflow_id or not task:
        raise ApiError(BAD_PARAMETER, "the URL names no workflow id or task")
    return workflow_id, task


def task_logs(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """The stored log of one attempt (default the latest) from ``offset``."""
    workflow_id, task = _route(req)
    attempt = int_param(req, "attempt", None, minimum=1)
    offset = int_param(req, "offset", 0, minimum=0) or 0
    limit = int_param(req, "limit", DEFAULT_LIMIT, minimum=1, maximum=MAX_LIMIT)
    follow = choice_param(req, "follow", ("true", "false")) == "true"
    got = runtime.client().logs(workflow_id, task, attempt, offset, limit, follow=follow)
    headers = log_headers(got.attempt, got.next_offset, got.finished)
    return func.HttpResponse(got.data, status_code=200, headers=headers,
                             mimetype="text/plain", charset="utf-8")


def task_detail(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """One task with its attempt history and explanation."""
    workflow_id, task = _route(req)
    return json_response(runtime.client().task(workflow_id, task))

"""The HTTP API blueprint (route prefix ``/api``; function key or Entra ID: see ``http_auth``).

Handlers parse the request, call ``WorkflowClient`` (the class the CLI uses) and map
errors to JSON; there is no engine logic here. Routes and answers are described in
``openapi.json`` next to this module (served at ``GET /api/openapi.json``).
"""

import dataclasses
import json
from functools import cache
from importlib import resources
from typing import Any

import azure.functions as func

from dagq.core.model import TASK_STATUSES, WORKFLOW_STATUSES
from dagq.core.priority import BANDS
from dagq.functions import http_logs, new_blueprint
from dagq.functions.errors import ApiError, json_response
from dagq.functions.http_io import (
    choice_param,
    int_param,
    number_param,
    object_param,
    read_definition,
    text_param,
)
from dagq.functions.routes import Routes
from dagq.functions.runtime import Runtime
from dagq.functions.task_data import route_value, task_file, task_files, task_output
from dagq.gc_pause import paused
from dagq.protocol import http
from dagq.protocol.http import BAD_PARAMETER, DEFAULT_PAGE, MAX_PAGE, MAX_WAIT_S
from dagq.views.listing import ORDERS, WorkflowFilter, list_page, row_summary

WAIT_POLL_S = 1.0
"""Seconds between index reads of a bounded wait (one read each)."""


def _route_id(req: func.HttpRequest) -> str:
    return route_value(req, "id", "workflow id")


def submit(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """``POST /workflows[?id=&max_fan_in=&params=&priority=]``: 201 created, 200 same
    definition, 409 other; ``params`` is a JSON object of run parameters, ``priority``
    the run's band (``high``, ``normal``, ``low``)."""
    with paused():  # from parsing to the last write, as ``dagq submit`` does
        defn = read_definition(req, runtime.settings.max_request_bytes)
        priority = choice_param(req, "priority", BANDS)
        if priority is not None:
            defn = dataclasses.replace(defn, priority=priority)
        workflow_id = text_param(req, "id")
        max_fan_in = int_param(req, "max_fan_in", None, minimum=2)
        params = object_param(req, "params")
        done = runtime.client().submit(defn, workflow_id=workflow_id, max_fan_in=max_fan_in,
                                       params=params)
    return json_response({"id": done.id, "created": done.created},
                         201 if done.created else 200,
                         headers={"Location": http.PREFIX + http.GET_WORKFLOW.path(id=done.id)})


def validate(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """``POST /workflows/validate``: 200 when valid, 400 listing every problem."""
    with paused():
        defn = read_definition(req, runtime.settings.max_request_bytes)
    return json_response({"valid": True, "name": defn.name, "tasks": len(defn.tasks)})


def list_workflows(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """``GET /workflows[?status=&since=&name=&order=&limit=&after=]``: one page of
    summaries, by id or newest first (``dagq.views.listing``), and the ``after`` of the
    next page (``next``, null on the last)."""
    where = WorkflowFilter(status=choice_param(req, "status", WORKFLOW_STATUSES),
                           since=number_param(req, "since"), name=text_param(req, "name"))
    order = choice_param(req, "order", ORDERS) or "id"
    limit = int_param(req, "limit", DEFAULT_PAGE, minimum=1, maximum=MAX_PAGE) or DEFAULT_PAGE
    try:
        page = list_page(runtime.client().backend.index, where, order=order, limit=limit,
                         after=text_param(req, "after"))
    except ValueError as exc:
        raise ApiError(BAD_PARAMETER, str(exc), [{"parameter": "after"}]) from None
    return json_response({"workflows": [row_summary(r) for r in page.rows],
                          "next": page.next})


def get_workflow(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """``GET /workflows/{id}[?wait=S]``: the summary ``dagq status --json`` prints; with
    ``wait``, answered once the workflow is terminal or after ``S`` seconds."""
    workflow_id = _route_id(req)
    wait = int_param(req, "wait", 0, minimum=0, maximum=MAX_WAIT_S) or 0
    client = runtime.client()
    if wait:
        return json_response(client.wait(workflow_id, wait, interval_s=WAIT_POLL_S))
    return json_response(client.status(workflow_id))


def list_tasks(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """``GET /workflows/{id}/tasks[?prefix=&status=&queue=&offset=&limit=&order=&expand=]``:
    the matching tasks (a page of them with ``offset``/``limit``; ``order=attention``
    puts failed and running ones first; ``expand=true`` lists a mapped task's instances
    too), how many matched (``total``), and the counts per shown status and per phase
    over every task."""
    workflow_id = _route_id(req)
    page = runtime.client().task_page(
        workflow_id, prefix=text_param(req, "prefix"),
        status=choice_param(req, "status", TASK_STATUSES), queue=text_param(req, "queue"),
        offset=int_param(req, "offset", 0, minimum=0) or 0,
        limit=int_param(req, "limit", None, minimum=0),
        attention_first=choice_param(req, "order", ("definition", "attention")) == "attention",
        expand=choice_param(req, "expand", ("true", "false")) == "true")
    return json_response({"id": workflow_id, "tasks": page.rows, "total": page.total,
                          "counts": page.counts, "phases": page.phases})


def cancel(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """``POST /workflows/{id}/cancel[?reason=TEXT]``: 200 with the summary once the
    cancel is in the state (tasks not started are ``cancelled``); 409 with the status if
    it had ended."""
    workflow_id = _route_id(req)
    client = runtime.client()
    client.cancel(workflow_id, reason=text_param(req, "reason"))
    return json_response(client.summary(workflow_id))


def retry(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """``POST /workflows/{id}/retry[?tasks=["a"]]``: 200 with the summary and the request
    id once the tasks are reset; 409 with the status if the workflow completed (and no
    ``tasks`` were named: those and the tasks after them run again in any case)."""
    workflow_id = _route_id(req)
    client = runtime.client()
    request_id = client.retry(workflow_id, tasks=_names_param(req, "tasks"))
    return json_response({**client.summary(workflow_id), "request_id": request_id})


def suspend(runtime: Runtime, req: func.HttpRequest, suspended: bool) -> func.HttpResponse:
    """``POST /workflows/{id}/suspend`` and ``.../resume``: 200 with the summary once no
    task starts (or they start again); 409 with the status if the workflow ended."""
    workflow_id = _route_id(req)
    client = runtime.client()
    client.suspend(workflow_id, suspended)
    return json_response(client.summary(workflow_id))


def _names_param(req: func.HttpRequest, name: str) -> tuple[str, ...]:
    """A query value holding a JSON array of task names (400 otherwise)."""
    value = text_param(req, name)
    if value is None:
        return ()
    try:
        names = json.loads(value)
    except ValueError:
        names = None
    if not isinstance(names, list) or not names or not all(
            isinstance(n, str) and n for n in names):
        raise ApiError(BAD_PARAMETER, f'query parameter {name} must be a JSON array of task '
                                      f'names such as ["train"], got {value[:80]!r}',
                       [{"parameter": name}])
    return tuple(names)


def health(runtime: Runtime, trigger: str) -> func.HttpResponse:
    """``GET /health``: 200 when the store answers, 503 otherwise."""
    settings = runtime.settings
    info: dict[str, Any] = {
        "store": settings.store, "queues": settings.queues or "store",
        "coordinator_trigger": trigger,
        "completion_queue": runtime.env.get("DAGQ_COMPLETION_QUEUE"),
    }
    runtime.backend().index.query(limit=1)
    return json_response({"status": "ok", **info})


@cache
def openapi_document() -> bytes:
    """The packaged OpenAPI 3 document."""
    return resources.files("dagq.functions").joinpath("openapi.json").read_bytes()


def openapi() -> func.HttpResponse:
    """``GET /openapi.json``."""
    return func.HttpResponse(openapi_document(), mimetype="application/json", charset="utf-8")


def http_blueprint(runtime: Runtime, trigger: str = "none") -> func.Blueprint:
    """The HTTP functions, bound to ``runtime``; ``trigger`` is reported by ``/health``."""
    bp = new_blueprint()
    routes = Routes(bp, runtime)
    routes.add(http.SUBMIT, lambda req: submit(runtime, req))
    routes.add(http.VALIDATE, lambda req: validate(runtime, req))
    routes.add(http.LIST_WORKFLOWS, lambda req: list_workflows(runtime, req))
    routes.add(http.GET_WORKFLOW, lambda req: get_workflow(runtime, req))
    routes.add(http.LIST_TASKS, lambda req: list_tasks(runtime, req))
    routes.add(http.GET_TASK, lambda req: http_logs.task_detail(runtime, req))
    routes.add(http.TASK_LOGS, lambda req: http_logs.task_logs(runtime, req))
    routes.add(http.TASK_OUTPUT, lambda req: task_output(runtime, req))
    routes.add(http.TASK_FILES, lambda req: task_files(runtime, req))
    routes.add(http.TASK_FILE, lambda req: task_file(runtime, req))
    routes.add(http.CANCEL, lambda req: cancel(runtime, req))
    routes.add(http.RETRY, lambda req: retry(runtime, req))
    routes.add(http.SUSPEND, lambda req: suspend(runtime, req, True))
    routes.add(http.RESUME, lambda req: suspend(runtime, req, False))
    routes.add(http.HEALTH, lambda req: health(runtime, trigger))
    routes.add(http.OPENAPI, lambda req: openapi())
    return bp

"""HTTP routes of the web status page and of the views behind it (auth level FUNCTION,
like the rest of the API):

- ``GET /status``: the page (HTML with its script inlined; pass ``?code=KEY`` in Azure);
- ``GET /workflows/{id}/graph[?format=json|svg|mermaid|dot&max_width=N]``: the DAG;
- ``GET /workflows/{id}/explain[?task=]``: why tasks are where they are;
- ``GET /workflows/{id}/task?name=T``: one task with its explanation and output (the
  name travels in the query because task names may contain ``/``).

Handlers only parse, call ``WorkflowClient`` and map errors (``dagq.functions.errors``).
"""

from __future__ import annotations

import azure.functions as func

from dagq.functions import new_blueprint
from dagq.functions.errors import ApiError, answer, json_response
from dagq.functions.http_api import _route_id
from dagq.functions.http_auth import http_auth_level, identity_guard
from dagq.functions.http_io import choice_param, int_param, text_param
from dagq.functions.runtime import Runtime
from dagq.graph.render import FORMATS, MEDIA_TYPES, render
from dagq.web import page

GRAPH_FORMATS = ("json", *FORMATS)


def status_page() -> func.HttpResponse:
    """``GET /status``: the status page."""
    return func.HttpResponse(page(), mimetype="text/html", charset="utf-8",
                             headers={"Cache-Control": "no-cache",
                                      "Content-Security-Policy": "default-src 'self'; "
                                      "script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                      "frame-ancestors 'none'",
                                      "X-Frame-Options": "DENY",
                                      "Referrer-Policy": "no-referrer"})


def graph(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """``GET /workflows/{id}/graph``: the graph model as JSON, or a picture of it."""
    workflow_id = _route_id(req)
    fmt = choice_param(req, "format", GRAPH_FORMATS) or "json"
    max_width = int_param(req, "max_width", None, minimum=2)
    model = runtime.client().graph(workflow_id)
    if fmt == "json":
        return json_response(model)
    return func.HttpResponse(render(model, fmt, max_width), mimetype=MEDIA_TYPES[fmt],
                             charset="utf-8")


def explain(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """``GET /workflows/{id}/explain[?task=]``."""
    workflow_id = _route_id(req)
    rows = runtime.client().explain(workflow_id, text_param(req, "task"))
    return json_response({"id": workflow_id, "tasks": rows})


def task_detail(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """``GET /workflows/{id}/task?name=T``: summary, explanation and output of a task."""
    workflow_id = _route_id(req)
    name = text_param(req, "name")
    if name is None:
        raise ApiError(400, "bad_parameter", "give the task as ?name=TASK",
                       [{"parameter": "name"}])
    client = runtime.client()
    rows = [t for t in client.tasks(workflow_id, prefix=name) if t["name"] == name]
    if not rows:
        raise ApiError(404, "not_found", f"workflow {workflow_id!r} has no task {name!r}")
    (why,) = client.explain(workflow_id, name)
    output = client.output(workflow_id, name) if rows[0]["has_output"] else None
    return json_response({"id": workflow_id, "task": rows[0], "explanation": why,
                          "output": output})


def status_blueprint(runtime: Runtime) -> func.Blueprint:
    """The status page and view routes, bound to ``runtime``."""
    auth, guard = http_auth_level(runtime.env), identity_guard(runtime.env)
    bp = new_blueprint()

    @bp.function_name("status_page")
    @bp.route(route="status", methods=["GET"], auth_level=auth)
    @guard
    def status_page_fn(req: func.HttpRequest) -> func.HttpResponse:
        return answer(status_page)

    @bp.function_name("workflow_graph")
    @bp.route(route="workflows/{id}/graph", methods=["GET"], auth_level=auth)
    @guard
    def graph_fn(req: func.HttpRequest) -> func.HttpResponse:
        return answer(lambda: graph(runtime, req))

    @bp.function_name("workflow_explain")
    @bp.route(route="workflows/{id}/explain", methods=["GET"], auth_level=auth)
    @guard
    def explain_fn(req: func.HttpRequest) -> func.HttpResponse:
        return answer(lambda: explain(runtime, req))

    @bp.function_name("task_detail")
    @bp.route(route="workflows/{id}/task", methods=["GET"], auth_level=auth)
    @guard
    def task_fn(req: func.HttpRequest) -> func.HttpResponse:
        return answer(lambda: task_detail(runtime, req))

    return bp

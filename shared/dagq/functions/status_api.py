"""HTTP routes of the web status page and of the views behind it (auth level FUNCTION,
like the rest of the API):

- ``GET /status``: the page (HTML with its script inlined; pass ``?code=KEY`` in Azure);
- ``GET /workflows/{id}/graph[?format=json|svg|mermaid|dot&max_width=N]``: the DAG;
- ``GET /workflows/{id}/explain[?task=]``: why tasks are where they are, and ``hints``:
  what keeps the workflow from ending (``dagq.views.waiting.hints_of``, the sentences
  ``dagq wait`` prints; the page shows them as a banner).

One task (its attempts and explanation) is ``GET /workflows/{id}/tasks/{task}`` of the
API (``dagq.functions.http_logs``), which the page reads too.

Handlers only parse, call ``WorkflowClient`` and map errors (``dagq.functions.errors``).
"""

from __future__ import annotations

import azure.functions as func

from dagq.functions import new_blueprint
from dagq.functions.errors import json_response
from dagq.functions.http_api import _route_id
from dagq.functions.http_io import choice_param, int_param, text_param
from dagq.functions.routes import Routes
from dagq.functions.runtime import Runtime
from dagq.graph.render import FORMATS, MEDIA_TYPES, render
from dagq.protocol import http
from dagq.views.waiting import hints_of
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
    """``GET /workflows/{id}/explain[?task=]``: the explanations and their ``hints``."""
    workflow_id = _route_id(req)
    rows = runtime.client().explain(workflow_id, text_param(req, "task"))
    hints = [{"key": k, "text": v} for k, v in hints_of(rows).items()]
    return json_response({"id": workflow_id, "tasks": rows, "hints": hints})


def status_blueprint(runtime: Runtime) -> func.Blueprint:
    """The status page and view routes, bound to ``runtime``."""
    bp = new_blueprint()
    routes = Routes(bp, runtime)
    routes.add(http.STATUS_PAGE, lambda req: status_page())
    routes.add(http.GRAPH, lambda req: graph(runtime, req))
    routes.add(http.EXPLAIN, lambda req: explain(runtime, req))
    return bp

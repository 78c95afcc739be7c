"""The status page and view routes called in-process, on a real store (SQLite and
Azurite)."""

from __future__ import annotations

import azure.functions as func
import pytest

from dagq.functions.http_api import http_blueprint
from dagq.functions.runtime import Runtime
from dagq.functions.status_api import status_blueprint
from dagq.worker.heartbeat import Heartbeat
from tests.functions.host import Handler, app_of, http, user_functions

FLOW = b"""\
name: flow
tasks:
  - {name: a, kwargs: {cmd: "true"}}
  - {name: b, depends_on: [a], queue: gpu, kwargs: {cmd: "true"}}
"""


@pytest.fixture
def fns(runtime: Runtime) -> dict[str, Handler]:
    """The HTTP API and the status routes on the store of ``runtime`` (SQLite, Azurite)."""
    return user_functions(app_of(http_blueprint(runtime), status_blueprint(runtime)))


def raw(fn: Handler, path: str, params: dict[str, str] | None = None,
        route: dict[str, str] | None = None) -> func.HttpResponse:
    resp = fn(func.HttpRequest("GET", f"https://app.example/api/{path}", headers={},
                               params=params or {}, route_params=route or {}, body=b""))
    assert isinstance(resp, func.HttpResponse)
    return resp


def submitted(fns: dict[str, Handler]) -> str:
    code, body = http(fns["submit_workflow"], "POST", "workflows", body=FLOW,
                      params={"id": "wf-1"})
    assert code == 201, body
    return "wf-1"


def test_the_page_is_html_with_its_script_inlined(fns: dict[str, Handler]) -> None:
    resp = raw(fns["status_page"], "status")
    page = resp.get_body().decode()
    assert resp.status_code == 200 and resp.mimetype == "text/html"
    assert "/*SCRIPT*/" not in page and "function workflowView" in page
    assert '"failed": "#c62828"' in page  # the palette the pictures use
    assert "http://" not in page and "https://" not in page  # nothing from elsewhere


def test_graph_as_json_and_as_svg(fns: dict[str, Handler]) -> None:
    wf = submitted(fns)
    code, model = http(fns["workflow_graph"], "GET", f"workflows/{wf}/graph", route={"id": wf})
    assert code == 200
    assert [(t["name"], t["deps"], t["status"]) for t in model["tasks"]] == [
        ("a", [], "pending"), ("b", ["a"], "pending")]
    resp = raw(fns["workflow_graph"], f"workflows/{wf}/graph", {"format": "svg"}, {"id": wf})
    assert resp.mimetype == "image/svg+xml" and b'data-task="b"' in resp.get_body()
    code, err = http(fns["workflow_graph"], "GET", f"workflows/{wf}/graph",
                     params={"format": "png"}, route={"id": wf})
    assert code == 400 and "format" in err["error"]
    code, err = http(fns["workflow_graph"], "GET", "workflows/nope/graph", route={"id": "nope"})
    assert code == 404


def test_explain_and_one_task(fns: dict[str, Handler]) -> None:
    wf = submitted(fns)
    code, body = http(fns["workflow_explain"], "GET", f"workflows/{wf}/explain",
                      params={"task": "b"}, route={"id": wf})
    assert code == 200 and [r["task"] for r in body["tasks"]] == ["b"]
    assert any("not been started by a coordinator" in r for r in body["tasks"][0]["reasons"])
    code, body = http(fns["get_task"], "GET", f"workflows/{wf}/tasks/a",
                      route={"id": wf, "task": "a"})
    assert code == 200 and body["phase"] == "pending" and body["has_output"] is False
    assert body["explanation"]["task"] == "a" and body["attempts"] == []
    code, body = http(fns["get_task"], "GET", f"workflows/{wf}/tasks/zz",
                      route={"id": wf, "task": "zz"})
    assert (code, body["code"]) == (400, "task_error") and "zz" in body["error"]
    code, body = http(fns["workflow_explain"], "GET", f"workflows/{wf}/explain",
                      params={"task": "zz"}, route={"id": wf})
    assert code == 400 and "zz" in body["error"]  # a query naming no task


def test_phases_follow_worker_heartbeats(fns: dict[str, Handler], runtime: Runtime) -> None:
    wf = submitted(fns)
    coord = runtime.coordinator()
    for _ in range(5):  # apply the start message: task a is dispatched
        coord.step()
    code, model = http(fns["workflow_graph"], "GET", f"workflows/{wf}/graph", route={"id": wf})
    assert code == 200 and model["tasks"][0]["phase"] == "queued"
    code, body = http(fns["workflow_explain"], "GET", f"workflows/{wf}/explain",
                      params={"task": "a"}, route={"id": wf})
    assert any("queue 'default' has no live worker" in r for r in body["tasks"][0]["reasons"])
    Heartbeat(runtime.backend().records, "host:1:default", "default").beat([f"{wf}/a/1"])
    code, body = http(fns["list_tasks"], "GET", f"workflows/{wf}/tasks", route={"id": wf})
    assert [t["phase"] for t in body["tasks"]] == ["started", "pending"]

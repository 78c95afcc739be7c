"""HTTP handlers called in-process with func.HttpRequest against a real store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dagq.client import WorkflowClient
from dagq.functions.http_api import http_blueprint
from dagq.functions.runtime import Runtime
from dagq.ports import Backend
from dagq.protocol.messages import CompletionMessage
from dagq.protocol.names import COMPLETIONS
from tests.functions.host import (
    Handler,
    app_of,
    assert_nothing_written,
    deliver_storage_queue,
    http,
    user_functions,
)

DIAMOND = b"""\
name: diamond
tasks:
  - name: a
    kwargs: {cmd: "true"}
  - name: b
    kwargs: {cmd: "true"}
    depends_on: [a]
  - name: c
    kwargs: {cmd: "true"}
    depends_on: [a]
    queue: gpu
  - name: d
    kwargs: {cmd: "true"}
    depends_on: [b, c]
"""

CYCLE = b"""\
name: loop
tasks:
  - {name: a, kwargs: {cmd: "true"}, depends_on: [b]}
  - {name: b, kwargs: {cmd: "true"}, depends_on: [a]}
"""


def test_submit_then_status_and_tasks(fns: dict[str, Handler], backend: Backend) -> None:
    status, body = http(fns["submit_workflow"], "POST", "workflows", body=DIAMOND)
    assert status == 201 and body["created"] is True
    wf = body["id"]
    status, summary = http(fns["get_workflow"], "GET", f"workflows/{wf}", route={"id": wf})
    assert status == 200
    assert (summary["id"], summary["name"], summary["status"]) == (wf, "diamond", "pending")
    assert deliver_storage_queue(fns["coordinator_queue"], backend) == 1  # the start request
    status, summary = http(fns["get_workflow"], "GET", f"workflows/{wf}", route={"id": wf})
    assert summary["status"] == "running"
    status, tasks = http(fns["list_tasks"], "GET", f"workflows/{wf}/tasks", route={"id": wf})
    assert status == 200
    assert {t["name"]: t["status"] for t in tasks["tasks"]} == {
        "a": "running", "b": "pending", "c": "pending", "d": "pending"}
    _, gpu = http(fns["list_tasks"], "GET", "", route={"id": wf}, params={"queue": "gpu"})
    assert [t["name"] for t in gpu["tasks"]] == ["c"]
    _, running = http(fns["list_tasks"], "GET", "", route={"id": wf},
                      params={"status": "running", "prefix": "a"})
    assert [t["name"] for t in running["tasks"]] == ["a"]
    _, page = http(fns["list_tasks"], "GET", "", route={"id": wf},
                   params={"offset": "1", "limit": "2", "order": "attention"})
    assert [t["name"] for t in page["tasks"]] == ["b", "c"]  # a (running) came first
    assert page["total"] == 4 and page["counts"] == {"queued": 1, "pending": 3}
    bad, _ = http(fns["list_tasks"], "GET", "", route={"id": wf}, params={"limit": "-1"})
    assert bad == 400


def test_json_and_yaml_bodies_but_not_plain_text(fns: dict[str, Handler]) -> None:
    definition = {"name": "j", "tasks": [{"name": "only", "kwargs": {"cmd": "true"}}]}
    status, body = http(fns["submit_workflow"], "POST", "workflows",
                        body=json.dumps(definition).encode(),
                        content_type="application/json; charset=utf-8")
    assert status == 201
    status, body = http(fns["validate_workflow"], "POST", "workflows/validate",
                        body=DIAMOND, content_type="text/yaml")
    assert (status, body) == (200, {"valid": True, "name": "diamond", "tasks": 4})
    # text/plain is what a page on another site may send without asking: refused
    status, body = http(fns["validate_workflow"], "POST", "workflows/validate",
                        body=DIAMOND, content_type="text/plain")
    assert (status, body["code"]) == (415, "unsupported_media_type")


def test_client_id_is_idempotent(fns: dict[str, Handler], backend: Backend) -> None:
    submit = fns["submit_workflow"]
    assert http(submit, "POST", "workflows", body=DIAMOND, params={"id": "nightly-1"}) == (
        201, {"id": "nightly-1", "created": True})
    assert http(submit, "POST", "workflows", body=DIAMOND, params={"id": "nightly-1"}) == (
        200, {"id": "nightly-1", "created": False})
    other = DIAMOND.replace(b"name: diamond", b"name: other")
    status, body = http(submit, "POST", "workflows", body=other, params={"id": "nightly-1"})
    assert status == 409 and body["code"] == "id_conflict"
    assert [r.name for r in backend.index.query()] == ["diamond"]


def test_an_id_made_at_submit_is_idempotent_too(fns: dict[str, Handler],
                                                backend: Backend) -> None:
    submit = fns["submit_workflow"]
    status, body = http(submit, "POST", "workflows", body=DIAMOND)
    made = body["id"]
    assert status == 201 and backend.index.get(made).definition_hash == ""  # not hashed
    assert http(submit, "POST", "workflows", body=DIAMOND, params={"id": made}) == (
        200, {"id": made, "created": False})  # the stored definition is hashed instead
    other = DIAMOND.replace(b"name: diamond", b"name: other")
    status, body = http(submit, "POST", "workflows", body=other, params={"id": made})
    assert status == 409 and body["code"] == "id_conflict"


@pytest.mark.parametrize(("body", "content_type", "params", "status", "code"), [
    (b"name: [unclosed\ntasks: []\n", "application/yaml", {}, 400, "invalid_definition"),
    (CYCLE, "application/yaml", {}, 400, "invalid_definition"),
    (b'{"name": "x", "tasks": [}', "application/json", {}, 400, "invalid_definition"),
    (b"", "application/yaml", {}, 400, "empty_body"),
    (DIAMOND, "application/x-www-form-urlencoded", {}, 415, "unsupported_media_type"),
    (DIAMOND, "application/yaml", {"id": "../etc"}, 400, "invalid_definition"),
    (DIAMOND, "application/yaml", {"max_fan_in": "one"}, 400, "bad_parameter"),
    (b"name: p\ntasks:\n  - name: sub\n    workflow: child.yaml\n", "application/yaml", {},
     400, "invalid_definition"),
    (DIAMOND, "application/yaml", {"id": "w" * 201}, 400, "invalid_definition"),
    (b"name: " + b"n" * 201 + b"\ntasks:\n  - name: a\n    kwargs: {cmd: 'true'}\n",
     "application/yaml", {}, 400, "invalid_definition"),
], ids=["invalid-yaml", "cycle", "invalid-json", "empty", "content-type", "bad-id",
        "bad-fan-in", "child-file-path", "id-over-200", "name-over-200"])
def test_bad_submissions_write_nothing(fns: dict[str, Handler], backend: Backend, body: bytes,
                                       content_type: str, params: dict[str, str], status: int,
                                       code: str) -> None:
    got, answer = http(fns["submit_workflow"], "POST", "workflows", body=body,
                       content_type=content_type, params=params)
    assert (got, answer["code"]) == (status, code)
    assert isinstance(answer["error"], str) and answer["error"]
    assert isinstance(answer["details"], list)
    assert_nothing_written(backend)


def test_cycle_problem_names_the_cycle_and_line(fns: dict[str, Handler]) -> None:
    status, answer = http(fns["validate_workflow"], "POST", "workflows/validate", body=CYCLE)
    assert status == 400
    [problem] = answer["details"]
    assert "a -> b -> a" in problem["message"]
    assert (problem["task"], problem["line"]) == ("a", 3)


def test_oversized_body_is_413(app_env: dict[str, str], backend: Backend) -> None:
    small = Runtime({**app_env, "DAGQ_MAX_REQUEST_BYTES": "64"})
    try:
        submit = user_functions(app_of(http_blueprint(small)))["submit_workflow"]
        status, answer = http(submit, "POST", "workflows", body=DIAMOND)
        assert (status, answer["code"]) == (413, "too_large")
        assert "DAGQ_MAX_REQUEST_BYTES" in answer["error"]
        status, _ = http(submit, "POST", "workflows", body=b"x", headers={"Content-Length": "65"})
        assert status == 413
        assert_nothing_written(backend)
    finally:
        small.close()


def test_unknown_id_is_404_everywhere(fns: dict[str, Handler], backend: Backend) -> None:
    for name, method in [("get_workflow", "GET"), ("list_tasks", "GET"),
                         ("cancel_workflow", "POST"), ("retry_workflow", "POST")]:
        status, answer = http(fns[name], method, "workflows/nope", route={"id": "nope"})
        assert (status, answer["code"]) == (404, "not_found"), name
        assert "nope" in answer["error"]
    assert_nothing_written(backend)


@pytest.mark.parametrize(("params", "name"), [
    ({"status": "bogus"}, "list_workflows"), ({"limit": "0"}, "list_workflows"),
    ({"limit": "many"}, "list_workflows"), ({"status": "done"}, "list_tasks"),
])
def test_bad_query_parameters_are_400(fns: dict[str, Handler], params: dict[str, str],
                                      name: str) -> None:
    http(fns["submit_workflow"], "POST", "workflows", body=DIAMOND, params={"id": "w"})
    status, answer = http(fns[name], "GET", "", params=params, route={"id": "w"})
    assert (status, answer["code"]) == (400, "bad_parameter")
    assert next(iter(params)) in answer["error"]


def test_list_pages_by_id(fns: dict[str, Handler]) -> None:
    ids = [f"wf-{i:02d}" for i in range(7)]
    for wf in reversed(ids):
        assert http(fns["submit_workflow"], "POST", "", body=DIAMOND, params={"id": wf})[0] == 201
    seen: list[str] = []
    after: str | None = None
    pages = 0
    while True:
        params = {"limit": "3", **({"after": after} if after else {})}
        status, page = http(fns["list_workflows"], "GET", "workflows", params=params)
        assert status == 200
        pages += 1
        seen += [w["id"] for w in page["workflows"]]
        after = page["next"]
        if after is None:
            break
    assert (seen, pages) == (ids, 3)
    _, pending = http(fns["list_workflows"], "GET", "", params={"status": "pending"})
    assert len(pending["workflows"]) == 7
    _, done = http(fns["list_workflows"], "GET", "", params={"status": "completed"})
    assert done == {"workflows": [], "next": None}


def test_list_filters_and_pages_newest_first_on_the_server(
        fns: dict[str, Handler], runtime: Runtime) -> None:
    for i in range(5):
        body = DIAMOND.replace(b"name: diamond", b"name: Diamond-%d" % (i % 2))
        assert http(fns["submit_workflow"], "POST", "", body=body,
                    params={"id": f"n{i}"})[0] == 201
    direct = [w["id"] for w in runtime.client().list_workflows()]
    seen: list[str] = []
    after: str | None = None
    while True:
        params = {"order": "newest", "limit": "2", **({"after": after} if after else {})}
        status, page = http(fns["list_workflows"], "GET", "", params=params)
        assert status == 200 and len(page["workflows"]) <= 2
        seen += [w["id"] for w in page["workflows"]]
        if (after := page["next"]) is None:
            break
    assert seen == direct and sorted(seen) == [f"n{i}" for i in range(5)]
    _, named = http(fns["list_workflows"], "GET", "", params={"name": "diamond-1"})
    assert [w["id"] for w in named["workflows"]] == ["n1", "n3"]
    _, later = http(fns["list_workflows"], "GET", "", params={"since": "4102444800"})
    assert later == {"workflows": [], "next": None}
    _, recent = http(fns["list_workflows"], "GET", "", params={"since": "0", "name": "DIAMOND"})
    assert len(recent["workflows"]) == 5


@pytest.mark.parametrize("params", [
    {"order": "newest", "after": "not-a-cursor"}, {"since": "yesterday"}, {"order": "oldest"},
])
def test_bad_list_parameters_are_400(fns: dict[str, Handler], params: dict[str, str]) -> None:
    status, answer = http(fns["list_workflows"], "GET", "", params=params)
    assert (status, answer["code"]) == (400, "bad_parameter")
    assert any(name in answer["error"] for name in params)


def test_cancel_and_retry(fns: dict[str, Handler], backend: Backend) -> None:
    http(fns["submit_workflow"], "POST", "", body=DIAMOND, params={"id": "w"})
    deliver_storage_queue(fns["coordinator_queue"], backend)
    status, answer = http(fns["cancel_workflow"], "POST", "", route={"id": "w"})
    # task a was dispatched, but no worker runs it: the cancel ends it at once
    assert status == 200
    assert (answer["status"], answer["cancel_requested"]) == ("cancelled", True)
    assert answer["counts"] == {"cancelled": 4}
    status, answer = http(fns["cancel_workflow"], "POST", "", route={"id": "w"})
    assert (status, answer["code"], answer["status"]) == (409, "finished", "cancelled")
    status, answer = http(fns["retry_workflow"], "POST", "", route={"id": "w"})
    assert status == 200 and answer["request_id"].startswith("w/retry/")
    assert (answer["status"], answer["cancel_requested"]) == ("running", False)
    _, tasks = http(fns["list_tasks"], "GET", "", route={"id": "w"})
    assert {t["name"]: t["status"] for t in tasks["tasks"]} == dict.fromkeys("abcd", "pending")
    deliver_storage_queue(fns["coordinator_queue"], backend)  # dispatches a's attempt 2
    _, tasks = http(fns["list_tasks"], "GET", "", route={"id": "w"})
    by_name = {t["name"]: t for t in tasks["tasks"]}
    assert (by_name["a"]["status"], by_name["a"]["attempt"]) == ("running", 2)
    sent = backend.queues.get("default").receive(10, 30)
    assert [m.body for m in sent if b'"attempt":2' in m.body]
    for t in ("a", "b", "c", "d"):
        attempt = 2 if t == "a" else 1
        done = CompletionMessage("w", t, attempt, success=True)
        backend.queues.get(COMPLETIONS).send(done.encode())
        deliver_storage_queue(fns["coordinator_queue"], backend)
    status, answer = http(fns["retry_workflow"], "POST", "", route={"id": "w"})
    assert (status, answer["code"], answer["status"]) == (409, "finished", "completed")


def test_health_and_openapi(fns: dict[str, Handler], app_env: dict[str, str]) -> None:
    status, health = http(fns["health"], "GET", "health")
    assert status == 200
    assert health["status"] == "ok" and health["store"] == app_env["DAGQ_STORE"]
    status, doc = http(fns["openapi"], "GET", "openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.")


def test_unreachable_store_is_503_not_500(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    rt = Runtime({"DAGQ_STORE": f"sqlite:{blocker / 'sub' / 'dagq.db'}"})
    try:
        fns = user_functions(app_of(http_blueprint(rt)))
        status, answer = http(fns["health"], "GET", "health")
        assert (status, answer["code"]) == (503, "store_unavailable")
        assert "sub" in answer["error"]
    finally:
        rt.close()


def test_bad_app_setting_is_reported(tmp_path: Path) -> None:
    rt = Runtime({"DAGQ_STORE": "ftp://nowhere"})
    fns = user_functions(app_of(http_blueprint(rt)))
    status, answer = http(fns["get_workflow"], "GET", "", route={"id": "w"})
    assert (status, answer["code"]) == (500, "configuration")
    assert "DAGQ_STORE" in answer["error"]


PARAMETERISED = b"""\
name: train
parameters:
  epochs: {type: integer, default: 5}
  label: {type: string}
tasks:
  - {name: fit, kwargs: {cmd: "train --epochs {params.epochs} --label {params.label}"}}
"""


def test_run_parameters_over_http(fns: dict[str, Handler], backend: Backend) -> None:
    submit = fns["submit_workflow"]
    for params, message in [({}, "missing required parameter 'label'"),
                            ({"params": '{"label": "a", "epoch": 1}'}, "unknown parameter"),
                            ({"params": '{"label": 3}'}, "must be of type string"),
                            ({"params": "[1]"}, "must be a JSON object")]:
        status, body = http(submit, "POST", "workflows", body=PARAMETERISED, params=params)
        assert status == 400, body
        assert message in json.dumps(body), body
    assert_nothing_written(backend)
    status, body = http(submit, "POST", "workflows", body=PARAMETERISED,
                        params={"params": '{"label": "x; rm -rf ~", "epochs": 7}', "id": "p"})
    assert status == 201, body
    defn = WorkflowClient(backend).state("p").definition
    assert dict(defn.params) == {"label": "x; rm -rf ~", "epochs": 7}


def test_suspend_resume_cancel_reason_and_retry_of_chosen_tasks(
        fns: dict[str, Handler], backend: Backend) -> None:
    http(fns["submit_workflow"], "POST", "", body=DIAMOND, params={"id": "w"})
    deliver_storage_queue(fns["coordinator_queue"], backend)
    status, answer = http(fns["suspend_workflow"], "POST", "", route={"id": "w"})
    assert status == 200 and answer["status"] == "running"
    assert WorkflowClient(backend).state("w").suspended
    done = CompletionMessage("w", "a", 1, success=True)
    backend.queues.get(COMPLETIONS).send(done.encode())
    deliver_storage_queue(fns["coordinator_queue"], backend)
    _, tasks = http(fns["list_tasks"], "GET", "", route={"id": "w"})
    assert {t["name"]: t["status"] for t in tasks["tasks"]}["b"] == "ready"  # held
    status, _ = http(fns["resume_workflow"], "POST", "", route={"id": "w"})
    assert status == 200
    deliver_storage_queue(fns["coordinator_queue"], backend)
    _, tasks = http(fns["list_tasks"], "GET", "", route={"id": "w"})
    assert {t["name"]: t["status"] for t in tasks["tasks"]}["b"] == "running"
    status, answer = http(fns["retry_workflow"], "POST", "", route={"id": "w"},
                          params={"tasks": "nope"})
    assert (status, answer["code"]) == (400, "bad_parameter")
    status, answer = http(fns["retry_workflow"], "POST", "", route={"id": "w"},
                          params={"tasks": '["a"]'})  # a's children b, c are running
    assert status == 400 and "running" in answer["error"]
    status, answer = http(fns["cancel_workflow"], "POST", "", route={"id": "w"},
                          params={"reason": "wrong table"})
    assert status == 200
    assert WorkflowClient(backend).state("w").cancel_reason == "wrong table"
    status, answer = http(fns["suspend_workflow"], "POST", "", route={"id": "w"})
    assert (status, answer["code"]) == (409, "finished")


def test_submit_takes_a_priority_band(fns: dict[str, Handler], backend: Backend) -> None:
    status, answer = http(fns["submit_workflow"], "POST", "", body=DIAMOND,
                          params={"id": "hi", "priority": "high"})
    assert status == 201
    assert WorkflowClient(backend).state("hi").definition.priority == "high"
    status, answer = http(fns["submit_workflow"], "POST", "", body=DIAMOND,
                          params={"id": "bad", "priority": "urgent"})
    assert (status, answer["code"]) == (400, "bad_parameter")

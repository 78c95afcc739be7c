"""The task-data routes (output, synced files) and the bounded wait, called in-process."""

from __future__ import annotations

import base64
import hashlib
import json

import azure.functions as func

from dagq.core.paths import dir_entry, dir_prefix
from dagq.ports import Backend
from dagq.protocol.messages import CompletionMessage
from dagq.protocol.names import COMPLETIONS
from tests.functions.host import Handler, deliver_storage_queue, http

ONE = b"name: one\ntasks:\n  - {name: a, kwargs: {cmd: 'true'}}\n"


def _finish(fns: dict[str, Handler], backend: Backend, wf: str, output: object) -> None:
    """Start ``wf`` and report its only task done with ``output``."""
    deliver_storage_queue(fns["coordinator_queue"], backend)
    done = CompletionMessage(wf, "a", 1, success=True, output=output)
    backend.queues.get(COMPLETIONS).send(done.encode())
    deliver_storage_queue(fns["coordinator_queue"], backend)


def _raw(fn: Handler, route: dict[str, str]) -> func.HttpResponse:
    req = func.HttpRequest("GET", "https://app.example/api/x", headers={}, params={},
                           route_params=route, body=b"")
    resp = fn(req)
    assert isinstance(resp, func.HttpResponse)
    return resp


def test_output_of_a_task(fns: dict[str, Handler], backend: Backend) -> None:
    http(fns["submit_workflow"], "POST", "workflows", body=ONE, params={"id": "w"})
    route = {"id": "w", "task": "a"}
    assert http(fns["task_output"], "GET", "", route=route) == (
        200, {"id": "w", "task": "a", "output": None})
    _finish(fns, backend, "w", {"loss": 0.25, "tags": ["x"]})
    assert http(fns["task_output"], "GET", "", route=route) == (
        200, {"id": "w", "task": "a", "output": {"loss": 0.25, "tags": ["x"]}})
    status, answer = http(fns["task_output"], "GET", "", route={"id": "w", "task": "zz"})
    assert (status, answer["code"]) == (400, "task_error") and "'zz'" in answer["error"]
    status, answer = http(fns["task_output"], "GET", "", route={"id": "no", "task": "a"})
    assert (status, answer["code"]) == (404, "not_found")


def test_files_list_and_download(fns: dict[str, Handler], backend: Backend) -> None:
    http(fns["submit_workflow"], "POST", "workflows", body=ONE, params={"id": "w"})
    route = {"id": "w", "task": "a"}
    assert http(fns["task_files"], "GET", "", route=route) == (
        200, {"id": "w", "task": "a", "files": []})
    blobs = {"model.bin": b"\x00\x01weights", "logs/epoch 1.txt": b"loss=1\n"}
    for rel, data in blobs.items():
        backend.outputs.put(dir_entry(dir_prefix("w", "a"), rel), data)  # as the worker syncs
    status, listing = http(fns["task_files"], "GET", "", route=route)
    assert status == 200
    assert listing["files"] == [
        {"path": rel, "size": len(data), "md5": hashlib.md5(data).hexdigest()}
        for rel, data in sorted(blobs.items())]
    for rel, data in blobs.items():
        resp = _raw(fns["task_file"], {**route, "path": rel})
        assert (resp.status_code, resp.mimetype, resp.get_body()) == (
            200, "application/octet-stream", data)
        assert resp.headers["Content-MD5"] == base64.b64encode(hashlib.md5(data).digest()).decode()
    for path, status, code in [("missing.txt", 404, "file_not_found"),
                               ("../x/model.bin", 400, "task_error"),
                               ("/etc/passwd", 400, "task_error")]:
        resp = _raw(fns["task_file"], {**route, "path": path})
        answer = json.loads(resp.get_body())
        assert (resp.status_code, answer["code"]) == (status, code), path
    resp = _raw(fns["task_file"], {"id": "nope", "task": "a", "path": "model.bin"})
    assert resp.status_code == 404


def test_bounded_wait_returns_at_the_end_or_the_timeout(fns: dict[str, Handler],
                                                        backend: Backend) -> None:
    http(fns["submit_workflow"], "POST", "workflows", body=ONE, params={"id": "w"})
    deliver_storage_queue(fns["coordinator_queue"], backend)
    status, summary = http(fns["get_workflow"], "GET", "", route={"id": "w"},
                           params={"wait": "1"})
    assert (status, summary["status"]) == (200, "running")
    _finish(fns, backend, "w", 7)
    status, summary = http(fns["get_workflow"], "GET", "", route={"id": "w"},
                           params={"wait": "200"})
    assert (status, summary["status"]) == (200, "completed")  # at once: it already ended
    for bad in ("201", "-1", "soon"):
        status, answer = http(fns["get_workflow"], "GET", "", route={"id": "w"},
                              params={"wait": bad})
        assert (status, answer["code"]) == (400, "bad_parameter") and "wait" in answer["error"]
    status, answer = http(fns["get_workflow"], "GET", "", route={"id": "no"},
                          params={"wait": "5"})
    assert (status, answer["code"]) == (404, "not_found")


def test_a_key_with_control_characters_is_a_400(fns: dict[str, Handler],
                                                backend: Backend) -> None:
    body = b'"\\e\\x10u": 1\nname: x\ntasks: []\n'  # found by the OpenAPI property run
    status, answer = http(fns["submit_workflow"], "POST", "workflows", body=body)
    assert (status, answer["code"]) == (400, "invalid_definition")
    assert any("unknown field" in p["message"] and p["line"] == 1 for p in answer["details"])
    status, answer = http(fns["list_workflows"], "GET", "", params={"status": ""})
    assert (status, answer["code"]) == (400, "bad_parameter")

"""The task routes of the HTTP API: one task with its attempts, and its log by offset,
after a real worker (in-process) ran the task on the same store."""

from __future__ import annotations

import azure.functions as func

from dagq.functions.runtime import Runtime
from dagq.ports import Backend
from dagq.worker.runtime import Worker
from tests.functions.host import Handler, deliver_storage_queue, http

FLAKY = b"""\
name: talk
tasks:
  - name: say
    num_retries: 1
    kwargs: {cmd: 'echo "line one of $DAGQ_ATTEMPT"; echo "line two"; test $DAGQ_ATTEMPT = 2'}
  - {name: later, depends_on: [say], kwargs: {cmd: "true"}}
"""


def _logs(fn: Handler, wf: str, task: str, **params: str) -> func.HttpResponse:
    req = func.HttpRequest("GET", f"https://app.example/api/workflows/{wf}/tasks/{task}/logs",
                           headers={}, params=params, route_params={"id": wf, "task": task},
                           body=b"")
    resp = fn(req)
    assert isinstance(resp, func.HttpResponse)
    return resp


def _work(runtime: Runtime, backend: Backend, fns: dict[str, Handler], rounds: int) -> None:
    """Apply completions and run what they dispatched, ``rounds`` times."""
    for _ in range(rounds):
        deliver_storage_queue(fns["coordinator_queue"], backend)
        Worker(backend, runtime.settings, "default", idle_timeout=0.5).run(
            install_signals=False)
    deliver_storage_queue(fns["coordinator_queue"], backend)


def test_task_detail_and_logs_by_attempt_and_offset(runtime: Runtime, backend: Backend,
                                                    fns: dict[str, Handler]) -> None:
    status, _ = http(fns["submit_workflow"], "POST", "workflows", body=FLAKY,
                     params={"id": "talk-1"})
    assert status == 201
    _work(runtime, backend, fns, rounds=3)  # start, attempt 1 fails, attempt 2 succeeds
    status, detail = http(fns["get_task"], "GET", "", route={"id": "talk-1", "task": "say"})
    assert status == 200 and detail["status"] == "completed" and detail["attempt"] == 2
    assert [(a["attempt"], a["result"], a["exit_code"]) for a in detail["attempts"]] == [
        (1, "failed", 1), (2, "succeeded", 0)]
    _, listing = http(fns["list_tasks"], "GET", "", route={"id": "talk-1"})
    rows = {t["name"]: t for t in listing["tasks"]}
    assert rows["say"]["attempts"] == detail["attempts"] and rows["later"]["attempts"]

    latest = _logs(fns["task_logs"], "talk-1", "say")
    assert latest.status_code == 200 and latest.mimetype == "text/plain"
    assert latest.get_body() == b"line one of 2\nline two\n"
    assert (latest.headers["X-Dagq-Attempt"], latest.headers["X-Dagq-Next-Offset"],
            latest.headers["X-Dagq-Finished"]) == ("2", "23", "true")
    first = _logs(fns["task_logs"], "talk-1", "say", attempt="1", offset="14")
    assert first.get_body() == b"line two\n" and first.headers["X-Dagq-Next-Offset"] == "23"
    part = _logs(fns["task_logs"], "talk-1", "say", attempt="1", limit="4")
    assert part.get_body() == b"line" and part.headers["X-Dagq-Next-Offset"] == "4"


def test_bad_task_routes_are_4xx(runtime: Runtime, backend: Backend,
                                 fns: dict[str, Handler]) -> None:
    http(fns["submit_workflow"], "POST", "workflows", body=FLAKY, params={"id": "talk-2"})
    deliver_storage_queue(fns["coordinator_queue"], backend)
    cases = [("nope", "say", {}, 404, "not_found"),
             ("talk-2", "ghost", {}, 400, "task_error"),
             ("talk-2", "say", {"attempt": "9"}, 400, "task_error"),
             ("talk-2", "later", {}, 400, "task_error"),  # not started: no attempt yet
             ("talk-2", "say", {"offset": "-1"}, 400, "bad_parameter"),
             ("talk-2", "say", {"limit": "lots"}, 400, "bad_parameter")]
    for wf, task, params, code, kind in cases:
        resp = _logs(fns["task_logs"], wf, task, **params)
        assert resp.status_code == code, (wf, task, params, resp.get_body())
        assert resp.mimetype == "application/json" and kind.encode() in resp.get_body()
    status, answer = http(fns["get_task"], "GET", "", route={"id": "talk-2", "task": "ghost"})
    assert (status, answer["code"]) == (400, "task_error")

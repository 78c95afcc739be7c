"""The schedules blueprint called in-process (func.HttpRequest, TimerRequest) on SQLite,
with the store named by DAGQ_STORE in the environment like a deployed app."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import azure.functions as func
import pytest
from azure.functions.timer import TimerRequest

from dagq.functions.runtime import Runtime
from dagq.functions.schedules import TICK_SCHEDULE, schedules_blueprint
from dagq.schedules.store import PARTITION
from tests.functions.host import Handler, app_of, user_functions
from tests.schedules.conftest import T0, WORKFLOW_YAML, Clock

MIDNIGHT = T0.replace(second=0)
NAMES = {"schedule_ticker", "list_schedules", "add_schedule", "get_schedule",
         "remove_schedule", "pause_schedule", "resume_schedule", "trigger_schedule",
         "backfill_schedule", "update_schedule"}


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            clock: Clock) -> Iterator[Runtime]:
    monkeypatch.setenv("DAGQ_STORE", f"sqlite:{tmp_path / 'app.db'}")
    rt = Runtime(clock=clock.time)  # reads os.environ, like the Functions host
    yield rt
    rt.close()


@pytest.fixture
def fns(runtime: Runtime) -> dict[str, Handler]:
    return user_functions(app_of(schedules_blueprint(runtime)))


def call(fn: Handler, method: str, path: str, body: Any = None, *,
         name: str | None = None, content_type: str = "application/json",
         raw: bytes | None = None) -> tuple[int, Any]:
    data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
    req = func.HttpRequest(method, f"https://app.example/api/{path}",
                           headers={"Content-Type": content_type}, params={},
                           route_params={"name": name} if name else {}, body=data)
    resp = fn(req)
    assert resp.mimetype == "application/json"
    return resp.status_code, json.loads(resp.get_body())


def add_body(**overrides: Any) -> dict[str, Any]:
    return {"name": "hourly", "cron": "0 * * * *", "definition": WORKFLOW_YAML, **overrides}


def test_registration_and_bindings(runtime: Runtime) -> None:
    app = app_of(schedules_blueprint(runtime))
    functions = {f.get_function_name(): json.loads(f.get_function_json())
                 for f in app.get_functions()}
    assert set(functions) == NAMES
    [timer] = functions["schedule_ticker"]["bindings"]
    assert (timer["type"], timer["schedule"]) == ("timerTrigger", TICK_SCHEDULE)
    assert (timer["runOnStartup"], timer["useMonitor"]) == (False, False)
    for name in NAMES - {"schedule_ticker"}:
        [trigger] = [b for b in functions[name]["bindings"] if b["direction"] == "IN"]
        assert (trigger["type"], trigger["authLevel"]) == ("httpTrigger", "FUNCTION")
        assert trigger["route"].startswith("schedules")


def test_add_list_get_pause_resume_remove(fns: dict[str, Handler]) -> None:
    status, added = call(fns["add_schedule"], "POST", "schedules", add_body(
        timezone="Europe/Berlin", overlap="allow", catchup="all", params={"region": "eu"}))
    assert status == 201, added
    assert (added["name"], added["workflow"], added["params"]) == ("hourly", "report",
                                                                   {"region": "eu"})
    assert added["next_run"] == "2026-03-02T01:00:00Z"
    as_object = add_body(name="daily", cron="@daily",
                         definition={"name": "obj", "tasks": [{"name": "a", "kind": "noop"}]})
    assert call(fns["add_schedule"], "POST", "schedules", as_object)[0] == 201
    status, listed = call(fns["list_schedules"], "GET", "schedules")
    assert status == 200 and [s["name"] for s in listed["schedules"]] == ["daily", "hourly"]
    status, shown = call(fns["get_schedule"], "GET", "schedules/hourly", name="hourly")
    assert status == 200 and len(shown["next_fire_times"]) == 5
    assert shown["overlap"] == "allow" and shown["definition"]["name"] == "report"
    status, paused = call(fns["pause_schedule"], "POST", "schedules/hourly/pause",
                          name="hourly")
    assert status == 200 and paused["paused"] is True
    status, resumed = call(fns["resume_schedule"], "POST", "schedules/hourly/resume",
                           name="hourly")
    assert status == 200 and resumed["paused"] is False
    status, removed = call(fns["remove_schedule"], "DELETE", "schedules/hourly", name="hourly")
    assert (status, removed) == (200, {"name": "hourly", "removed": True})
    assert [s["name"] for s in call(fns["list_schedules"], "GET", "schedules")[1]
            ["schedules"]] == ["daily"]


@pytest.mark.parametrize(("body", "status", "words"), [
    (add_body(cron="61 * * * *"), 400, ["minute field '61'"]),
    (add_body(timezone="Mars/Olympus"), 400, ["unknown time zone"]),
    (add_body(overlap="sometimes"), 400, ["unknown overlap policy"]),
    (add_body(name="no spaces"), 400, ["invalid schedule name"]),
    (add_body(definition="name: x\ntasks: []\n"), 400, ["problem"]),
    (add_body(definition="tasks: [unclosed"), 400, ["problem"]),
    ({"cron": 5, "extra": 1}, 400, ["problem"]),
    ([1, 2], 400, ["JSON object"]),
    (add_body(params={"bad": float("inf")}), 400, ["problem"]),
], ids=["cron", "zone", "overlap", "name", "invalid-definition", "bad-yaml", "fields",
        "not-object", "params"])
def test_bad_add_requests_are_4xx_and_write_nothing(fns: dict[str, Handler], runtime: Runtime,
                                                    body: Any, status: int,
                                                    words: list[str]) -> None:
    raw = json.dumps(body, allow_nan=True).encode()
    got, answer = call(fns["add_schedule"], "POST", "schedules", raw=raw)
    assert got == status, answer
    assert set(answer) >= {"error", "details"}
    for word in words:
        assert word in answer["error"]
    assert runtime.backend().records.list(PARTITION) == []


def test_field_problems_are_listed_in_details(fns: dict[str, Handler]) -> None:
    status, answer = call(fns["add_schedule"], "POST", "schedules", {"cron": 5, "extra": 1})
    assert status == 400
    assert {(d["field"], d["message"].split(";")[0]) for d in answer["details"]} == {
        ("extra", "unknown field"), ("name", "is required"), ("definition", "is required"),
        ("cron", "must be a string")}


def test_other_errors(fns: dict[str, Handler]) -> None:
    assert call(fns["add_schedule"], "POST", "schedules", add_body())[0] == 201
    status, answer = call(fns["add_schedule"], "POST", "schedules", add_body())
    assert status == 409 and "already exists" in answer["error"]
    assert call(fns["add_schedule"], "POST", "schedules", raw=b"{nope")[0] == 400
    assert call(fns["add_schedule"], "POST", "schedules", raw=b"x: 1",
                content_type="application/yaml")[0] == 415
    for fn, method, path in (("get_schedule", "GET", "schedules/ghost"),
                             ("remove_schedule", "DELETE", "schedules/ghost"),
                             ("pause_schedule", "POST", "schedules/ghost/pause"),
                             ("resume_schedule", "POST", "schedules/ghost/resume")):
        status, answer = call(fns[fn], method, path, name="ghost")
        assert status == 404 and "no schedule named 'ghost'" in answer["error"], fn


def test_too_large_body_is_413(runtime: Runtime, monkeypatch: pytest.MonkeyPatch,
                               clock: Clock) -> None:
    monkeypatch.setenv("DAGQ_MAX_REQUEST_BYTES", "100")
    rt = Runtime(clock=clock.time)
    try:
        small = user_functions(app_of(schedules_blueprint(rt)))
        status, _ = call(small["add_schedule"], "POST", "schedules", add_body())
    finally:
        rt.close()
    assert status == 413


def test_timer_fires_due_schedules(fns: dict[str, Handler], runtime: Runtime,
                                   clock: Clock) -> None:
    assert call(fns["add_schedule"], "POST", "schedules", add_body())[0] == 201
    clock.now = MIDNIGHT + timedelta(hours=1, seconds=3)
    fns["schedule_ticker"](TimerRequest(past_due=False))
    clock.now += timedelta(seconds=90)  # a late timer run fires nothing twice
    fns["schedule_ticker"](TimerRequest(past_due=True))
    ids = [r.id for r in runtime.backend().index.query()]
    assert ids == ["sched-hourly-20260302T010000Z"]
    status, shown = call(fns["get_schedule"], "GET", "schedules/hourly", name="hourly")
    assert status == 200
    assert shown["last_run"] == {"fire_time": "2026-03-02T01:00:00Z", "run_id": ids[0],
                                 "status": "pending"}
    assert [r["run_id"] for r in shown["runs"]] == ids


def test_trigger_backfill_and_update_over_http(fns: dict[str, Handler], clock: Clock) -> None:
    assert call(fns["add_schedule"], "POST", "schedules",
                add_body(overlap="buffer_one", history=5, catchup_window_s=30))[0] == 201
    status, started = call(fns["trigger_schedule"], "POST", "schedules/hourly/trigger",
                           name="hourly")
    assert (status, started["run_id"]) == (201, "sched-hourly-20260302T000030Z")
    body = {"from": "2026-03-01T00:00:00Z", "to": "2026-03-01T03:00:00Z"}
    status, filled = call(fns["backfill_schedule"], "POST", "schedules/hourly/backfill", body,
                          name="hourly")
    assert (status, filled["created"], len(filled["runs"])) == (200, 4, 4)
    assert call(fns["backfill_schedule"], "POST", "schedules/hourly/backfill", body,
                name="hourly")[1]["created"] == 0
    status, error = call(fns["backfill_schedule"], "POST", "schedules/hourly/backfill",
                         {"from": "yesterday", "to": "x"}, name="hourly")
    assert status == 400 and "ISO 8601" in error["error"]
    status, changed = call(fns["update_schedule"], "PATCH", "schedules/hourly",
                           {"cron": "30 * * * *", "history": 7}, name="hourly")
    assert status == 200, changed
    assert (changed["cron"], changed["history"], changed["overlap"]) == (
        "30 * * * *", 7, "buffer_one")
    status, error = call(fns["update_schedule"], "PATCH", "schedules/hourly",
                         {"name": "other"}, name="hourly")
    assert status == 400 and "unknown field" in error["error"]
    assert call(fns["trigger_schedule"], "POST", "schedules/ghost/trigger",
                name="ghost")[0] == 404

"""The schedules blueprint: a timer that fires due schedules every minute, and the HTTP
routes ``/api/schedules`` (list, add), ``/api/schedules/{name}`` (show, remove) and
``/api/schedules/{name}/pause|resume|trigger|backfill`` and ``PATCH
/api/schedules/{name}`` (function key or Entra ID: see ``http_auth``).

Handlers parse, call ``ScheduleStore`` / ``Ticker`` (the classes ``dagq schedule`` and
``dagq scheduler`` use) and map errors to JSON ``{"error", "code", "details"}``: bad
input is a 400, an unknown name 404, a taken name 409, never a 500.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import azure.functions as func

from dagq.compose.loader import require_inline
from dagq.core.model import WorkflowDef
from dagq.core.parse import definition_from_dict, load_definition
from dagq.core.schedule.policy import ScheduleSpec
from dagq.functions import new_blueprint, schedule_runs
from dagq.functions.errors import ApiError, json_response
from dagq.functions.http_io import read_body, require_json
from dagq.functions.routes import Routes
from dagq.functions.runtime import Runtime
from dagq.protocol import http
from dagq.protocol.http import BAD_JSON, BAD_PARAMETER, BAD_REQUEST
from dagq.schedules.store import (
    ScheduleStore,
    detail,
    summary,
)
from dagq.schedules.ticker import Ticker, TickReport

log = logging.getLogger("dagq.functions.schedules")

TICK_SCHEDULE = "0 * * * * *"
"""NCRONTAB of the ticker timer: second 0 of every minute."""
TICK_TOLERANCE_S = 120.0
"""Fire times up to two timer periods old count as on time (a late timer start loses none)."""
_TEXT, _OBJECT = ((str,), "a string"), ((dict,), "an object")
_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "name": _TEXT, "cron": _TEXT, "definition": ((str, dict), "a string or an object"),
    "timezone": _TEXT, "overlap": _TEXT, "catchup": _TEXT, "params": _OBJECT,
    "catchup_window_s": ((int, float), "a number of seconds"),
    "history": ((int,), "a whole number")}
_REQUIRED = ("name", "cron", "definition")


def tick(runtime: Runtime, now: datetime | None = None) -> TickReport:
    """One pass of the ticker over every schedule of the app's store."""
    ticker = Ticker(runtime.backend(), runtime.clock, tolerance_s=TICK_TOLERANCE_S)
    report = ticker.tick(now)
    log.info("%s", report.line())
    return report




def _name(req: func.HttpRequest) -> str:
    name = str(req.route_params.get("name") or "")
    if not name:
        raise ApiError(BAD_PARAMETER, "the URL names no schedule")
    return name


def _now(runtime: Runtime) -> datetime:
    return datetime.fromtimestamp(runtime.clock(), UTC)


def read_request(req: func.HttpRequest, max_bytes: int) -> dict[str, Any]:
    """The JSON object of an add request, with every field checked (400/413/415)."""
    body = read_body(req, max_bytes)
    require_json(req, body, "for a schedule")
    try:
        data = json.loads(body or b"null")
    except ValueError as exc:
        raise ApiError(BAD_JSON, f"the request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ApiError(BAD_REQUEST, "the request body must be a JSON object with "
                       "'name', 'cron' and 'definition'")
    problems: list[dict[str, str]] = []
    for key in sorted(set(data) - set(_FIELDS)):
        problems.append({"field": key, "message": f"unknown field; allowed: {', '.join(_FIELDS)}"})
    for key in _REQUIRED:
        if key not in data:
            problems.append({"field": key, "message": "is required"})
    for key, (kinds, want) in _FIELDS.items():
        if key in data and not isinstance(data[key], kinds):
            problems.append({"field": key, "message": f"must be {want}"})
    if problems:
        raise ApiError(BAD_REQUEST, f"the schedule request has {len(problems)} "
                       "problem(s)", list(problems))
    return data


def _definition(value: str | Mapping[str, Any]) -> WorkflowDef:
    if isinstance(value, str):
        defn = load_definition(value, source="definition")
    else:
        defn = definition_from_dict(value, source="definition")
    return require_inline(defn, why="by the HTTP API")


def add(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """``POST /schedules``: 201 with the new schedule's summary."""
    data = read_request(req, runtime.settings.max_request_bytes)
    now = _now(runtime)
    spec = ScheduleSpec.from_record({
        "name": data["name"], "cron": data["cron"],
        "timezone": data.get("timezone", "UTC"), "overlap": data.get("overlap", "skip"),
        "catchup": data.get("catchup", "none"), "params": data.get("params", {}),
        "catchup_window_s": data.get("catchup_window_s"), "history": data.get("history", 50),
        "created_at": now.isoformat()})
    defn = _definition(data["definition"])
    store = ScheduleStore(runtime.backend())
    sched = store.add(spec, defn)
    return json_response(summary(store, sched, now), 201,
                         headers={"Location": f"/api/schedules/{spec.name}"})


def list_all(runtime: Runtime) -> func.HttpResponse:
    """``GET /schedules``: every schedule's summary, by name."""
    store = ScheduleStore(runtime.backend())
    now = _now(runtime)
    return json_response({"schedules": [summary(store, s, now) for s in store.list()]})


def show(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """``GET /schedules/{name}``: spec, next 5 fire times, recent runs and missed times."""
    store = ScheduleStore(runtime.backend())
    return json_response(detail(store, store.get(_name(req)), _now(runtime)))


def remove(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """``DELETE /schedules/{name}``: 200, or 404 when there is no such schedule."""
    name = _name(req)
    ScheduleStore(runtime.backend()).remove(name)
    return json_response({"name": name, "removed": True})


def set_paused(runtime: Runtime, req: func.HttpRequest, paused: bool) -> func.HttpResponse:
    """``POST /schedules/{name}/pause`` or ``/resume``: 200 with the summary."""
    store = ScheduleStore(runtime.backend())
    name = _name(req)
    sched = store.pause(name) if paused else store.resume(name, _now(runtime))
    return json_response(summary(store, sched, _now(runtime)))


def schedules_blueprint(runtime: Runtime, timer_schedule: str = TICK_SCHEDULE) -> func.Blueprint:
    """The ticker timer and the schedule routes, bound to ``runtime``."""
    bp = new_blueprint()

    @bp.function_name("schedule_ticker")
    @bp.timer_trigger(arg_name="timer", schedule=timer_schedule, run_on_startup=False,
                      use_monitor=False)  # missed ticks are the ticker's own business
    def schedule_ticker(timer: func.TimerRequest) -> None:
        if timer.past_due:
            log.info("schedule ticker is running late")
        tick(runtime)

    routes = Routes(bp, runtime)
    routes.add(http.LIST_SCHEDULES, lambda req: list_all(runtime))
    routes.add(http.ADD_SCHEDULE, lambda req: add(runtime, req))
    routes.add(http.GET_SCHEDULE, lambda req: show(runtime, req))
    routes.add(http.REMOVE_SCHEDULE, lambda req: remove(runtime, req))
    routes.add(http.PAUSE_SCHEDULE, lambda req: set_paused(runtime, req, True))
    routes.add(http.RESUME_SCHEDULE, lambda req: set_paused(runtime, req, False))
    routes.add(http.TRIGGER_SCHEDULE, lambda req: schedule_runs.trigger(runtime, _name(req)))
    routes.add(http.BACKFILL_SCHEDULE,
               lambda req: schedule_runs.backfill(runtime, req, _name(req)))
    routes.add(http.UPDATE_SCHEDULE,
               lambda req: schedule_runs.update(runtime, req, _name(req), _definition))
    return bp

"""HTTP handlers that start or change a schedule on request: ``POST
/schedules/{name}/trigger``, ``POST /schedules/{name}/backfill`` (``{"from", "to"}``) and
``PATCH /schedules/{name}`` (the fields to change). The routes are registered by
``dagq.functions.schedules``; the work is done by ``dagq.schedules.actions`` and
``ScheduleStore.change_spec``, which the CLI uses too.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import azure.functions as func

from dagq.core.schedule.policy import ScheduleSpec
from dagq.functions.errors import ApiError, json_response
from dagq.functions.http_io import read_body, require_json
from dagq.functions.runtime import Runtime
from dagq.protocol.http import BAD_JSON, BAD_REQUEST
from dagq.schedules import actions
from dagq.schedules.store import ScheduleStore, summary

CHANGEABLE = ("cron", "timezone", "overlap", "catchup", "params", "catchup_window_s",
              "history", "definition")
"""Fields a ``PATCH /schedules/{name}`` may change."""


def json_object(req: func.HttpRequest, max_bytes: int, allowed: tuple[str, ...]) -> dict[str, Any]:
    """The request body as a JSON object holding only ``allowed`` keys (400 otherwise)."""
    body = read_body(req, max_bytes)
    require_json(req, body, "here")
    try:
        data = json.loads(body or b"{}")
    except ValueError as exc:
        raise ApiError(BAD_JSON, f"the request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ApiError(BAD_REQUEST, "the request body must be a JSON object")
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ApiError(BAD_REQUEST, f"unknown field(s) {', '.join(unknown)}; allowed: "
                       f"{', '.join(allowed)}", [{"field": k} for k in unknown])
    return data


def _instant(data: dict[str, Any], key: str) -> datetime:
    value = data.get(key)
    try:
        t = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(BAD_REQUEST, f"{key!r} must be an ISO 8601 time such as "
                       f"2026-03-01T00:00:00Z, got {value!r}", [{"field": key}]) from None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def trigger(runtime: Runtime, name: str) -> func.HttpResponse:
    """Start a run now: 201 with ``{"fire_time", "run_id", "created"}``."""
    now = datetime.fromtimestamp(runtime.clock(), UTC)
    started = actions.trigger(runtime.backend(), name, now)
    return json_response(started.to_json(), 201 if started.created else 200)


def backfill(runtime: Runtime, req: func.HttpRequest, name: str) -> func.HttpResponse:
    """Start a run for every fire time in ``[from, to]``: 200 with the runs."""
    data = json_object(req, runtime.settings.max_request_bytes, ("from", "to"))
    for key in ("from", "to"):
        if key not in data:
            raise ApiError(BAD_REQUEST, f"{key!r} is required", [{"field": key}])
    now = datetime.fromtimestamp(runtime.clock(), UTC)
    runs = actions.backfill(runtime.backend(), name, _instant(data, "from"),
                            _instant(data, "to"), now)
    return json_response({"runs": [r.to_json() for r in runs],
                          "created": sum(r.created for r in runs)})


def update(runtime: Runtime, req: func.HttpRequest, name: str,
           definition_of: Any) -> func.HttpResponse:
    """Change fields of a schedule in place: 200 with its summary."""
    data = json_object(req, runtime.settings.max_request_bytes, CHANGEABLE)
    store = ScheduleStore(runtime.backend())
    current = store.get(name)
    record = current.spec.to_record()
    record.update({k: v for k, v in data.items() if k != "definition"})
    defn = definition_of(data["definition"]) if "definition" in data else None
    sched = store.change_spec(name, ScheduleSpec.from_record(record), defn)
    return json_response(summary(store, sched, datetime.fromtimestamp(runtime.clock(), UTC)))

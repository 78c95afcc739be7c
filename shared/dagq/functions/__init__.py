"""Azure Functions blueprints: the HTTP API, the coordinator trigger and the repair timer.

``build_blueprints()`` reads the app settings once (the host indexes the app at start-up)
and returns fresh blueprints, so tests can build every registration in one process:

- ``http``: the HTTP API (``dagq.functions.http_api``) and the status page with its
  views (``dagq.functions.status_api``);
- the coordinator, chosen by ``DAGQ_COORDINATOR_TRIGGER``: ``servicebus`` (completion
  queue on Service Bus, sessions keyed by workflow id), ``storage_queue`` (completion
  queue on Storage Queues) or ``none`` (run ``dagq coordinator`` elsewhere). Unset, it
  follows the store: ``servicebus`` with ``DAGQ_QUEUES``, ``storage_queue`` with an Azure
  store, ``none`` with SQLite;
- ``timers`` (with a coordinator trigger only): the repair sweep on
  ``DAGQ_SWEEP_SCHEDULE`` (NCRONTAB with seconds, default every 30 s).

The trigger binds to ``%DAGQ_COMPLETION_QUEUE%``, which must name the store's completion
queue ``{prefix}-completions``; a missing or different value fails at start-up.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

import azure.functions as func

from dagq.errors import ConfigError
from dagq.functions.runtime import Runtime
from dagq.protocol.names import COMPLETIONS

TRIGGER_SETTING = "DAGQ_COORDINATOR_TRIGGER"
QUEUE_SETTING = "DAGQ_COMPLETION_QUEUE"
SCHEDULE_SETTING = "DAGQ_SWEEP_SCHEDULE"
DEFAULT_SWEEP_SCHEDULE = "*/30 * * * * *"
QUEUE_BINDING = f"%{QUEUE_SETTING}%"

Trigger = Literal["servicebus", "storage_queue", "none"]
TRIGGERS: tuple[Trigger, ...] = ("servicebus", "storage_queue", "none")

__all__ = ["Runtime", "build_app", "build_blueprints", "completion_queue_name",
           "coordinator_trigger"]


def new_blueprint() -> func.Blueprint:
    """An empty blueprint (the library's constructor is untyped)."""
    return func.Blueprint()  # type: ignore[no-untyped-call]


def coordinator_trigger(env: Mapping[str, str]) -> Trigger:
    """The coordinator registration the app settings ask for (``ConfigError`` if unusable)."""
    store = env.get("DAGQ_STORE", "") or "sqlite:"
    queues = env.get("DAGQ_QUEUES") or None
    raw = (env.get(TRIGGER_SETTING) or "").strip().lower()
    if not raw:
        return "servicebus" if queues else "storage_queue" if store.startswith("azure:") \
            else "none"
    for choice in TRIGGERS:
        if raw == choice:
            break
    else:
        raise ConfigError(f"{TRIGGER_SETTING}={raw!r} is not one of {', '.join(TRIGGERS)} "
                          f"(e.g. {TRIGGER_SETTING}=servicebus)")
    if choice == "servicebus" and not queues:
        raise ConfigError(f"{TRIGGER_SETTING}=servicebus needs the completion queue on Service "
                          "Bus: set DAGQ_QUEUES=sb://NAMESPACE, or use storage_queue")
    if choice == "storage_queue" and (queues or not store.startswith("azure:")):
        raise ConfigError(f"{TRIGGER_SETTING}=storage_queue needs the completion queue on "
                          f"Storage Queues: DAGQ_STORE={store!r} must be azure://ACCOUNT/PREFIX "
                          "and DAGQ_QUEUES unset (or use servicebus / none)")
    return choice


def completion_queue_name(env: Mapping[str, str]) -> str:
    """The physical completion queue of the Azure store ``DAGQ_STORE`` names."""
    from dagq.backends.azure.naming import parse_store_url

    return parse_store_url(env.get("DAGQ_STORE", "")).queue(COMPLETIONS)


def _check_queue_setting(env: Mapping[str, str]) -> None:
    expected = completion_queue_name(env)
    actual = env.get(QUEUE_SETTING)
    if actual != expected:
        state = f"is {actual!r}" if actual else "is not set"
        raise ConfigError(f"{QUEUE_SETTING} {state}; the coordinator trigger must read the "
                          f"store's completion queue: set {QUEUE_SETTING}={expected}")


def build_blueprints(env: Mapping[str, str] | None = None,
                     runtime: Runtime | None = None) -> list[func.Blueprint]:
    """Fresh blueprints for the app settings ``env`` (default ``os.environ``)."""
    from dagq.functions.blob_triggers import blob_events_mode, blob_triggers_blueprint
    from dagq.functions.coordinator_queue import storage_queue_blueprint
    from dagq.functions.coordinator_sb import servicebus_blueprint
    from dagq.functions.http_api import http_blueprint
    from dagq.functions.schedules import schedules_blueprint
    from dagq.functions.status_api import status_blueprint
    from dagq.functions.timers import timers_blueprint

    env = os.environ if env is None else env
    runtime = runtime or Runtime(env)
    trigger = coordinator_trigger(env)
    blueprints = [http_blueprint(runtime, trigger), schedules_blueprint(runtime),
                  status_blueprint(runtime)]
    events = blob_events_mode(env)
    if events != "none":  # blob-created events start trigger runs (docs/triggers.md)
        blueprints.append(blob_triggers_blueprint(runtime, events))
    if trigger != "none":
        _check_queue_setting(env)
        make = servicebus_blueprint if trigger == "servicebus" else storage_queue_blueprint
        blueprints.append(make(runtime))
        schedule = env.get(SCHEDULE_SETTING) or DEFAULT_SWEEP_SCHEDULE
        blueprints.append(timers_blueprint(runtime, schedule))
    return blueprints


def build_app(env: Mapping[str, str] | None = None,
              runtime: Runtime | None = None) -> func.FunctionApp:
    """A ``FunctionApp`` (auth level FUNCTION) with every blueprint registered."""
    app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
    for blueprint in build_blueprints(env, runtime):
        app.register_functions(blueprint)
    return app

"""What the Functions host would index: bindings, registrations per app setting, and the
deployment files (host.json, local settings, requirements, .funcignore, OpenAPI)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

import azure.functions as func
import pytest
from openapi_spec_validator import validate as validate_openapi

from dagq.config import Settings
from dagq.errors import ConfigError
from dagq.functions import build_blueprints, coordinator_trigger
from dagq.functions.http_api import openapi_document
from dagq.protocol import http
from tests.functions.host import app_of

ROOT = Path(__file__).resolve().parents[2]
AZURE = {"DAGQ_STORE": "azure://devstoreaccount1/ml-prod",
         "DAGQ_COMPLETION_QUEUE": "ml-prod-completions"}
SERVICEBUS = {**AZURE, "DAGQ_QUEUES": "sb://my-namespace",
              "DAGQ_COORDINATOR_TRIGGER": "servicebus"}
STORAGE = {**AZURE, "DAGQ_COORDINATOR_TRIGGER": "storage_queue"}
HTTP_NAMES = {"submit_workflow", "validate_workflow", "list_workflows", "get_workflow",
              "list_tasks", "get_task", "task_logs", "task_output", "task_files", "task_file",
              "cancel_workflow", "retry_workflow", "suspend_workflow", "resume_workflow",
              "health", "openapi",
              "list_schedules", "add_schedule", "get_schedule", "remove_schedule",
              "pause_schedule", "resume_schedule", "trigger_schedule", "backfill_schedule",
              "update_schedule", "status_page", "workflow_graph", "workflow_explain"}
ALWAYS = HTTP_NAMES | {"schedule_ticker"}
"""Functions registered whatever the coordinator trigger."""


def indexed(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Function name -> its function.json, as the host would index the app."""
    app = app_of(*build_blueprints(env))
    return {str(f.get_function_name()): json.loads(f.get_function_json())
            for f in app.get_functions()}


def trigger_of(function_json: dict[str, Any]) -> dict[str, Any]:
    [binding] = [b for b in function_json["bindings"] if b["direction"] == "IN"]
    return dict(binding)


def test_servicebus_registration() -> None:
    functions = indexed(SERVICEBUS)
    assert set(functions) == ALWAYS | {"coordinator_servicebus", "repair_sweep"}
    sb = trigger_of(functions["coordinator_servicebus"])
    assert sb == {"direction": "IN", "type": "serviceBusTrigger", "name": "messages",
                  "connection": "ServiceBusConnection", "queueName": "%DAGQ_COMPLETION_QUEUE%",
                  "isSessionsEnabled": True, "cardinality": "MANY"}


def test_storage_queue_registration() -> None:
    functions = indexed(STORAGE)
    assert set(functions) == ALWAYS | {"coordinator_queue", "repair_sweep"}
    assert trigger_of(functions["coordinator_queue"]) == {
        "direction": "IN", "type": "queueTrigger", "name": "message",
        "queueName": "%DAGQ_COMPLETION_QUEUE%", "connection": "AzureWebJobsStorage"}


def test_timer_and_http_bindings() -> None:
    functions = indexed({**STORAGE, "DAGQ_SWEEP_SCHEDULE": "*/10 * * * * *"})
    assert trigger_of(functions["repair_sweep"]) == {
        "direction": "IN", "type": "timerTrigger", "name": "timer",
        "schedule": "*/10 * * * * *", "runOnStartup": False, "useMonitor": False}
    for name in HTTP_NAMES:
        binding = trigger_of(functions[name])
        assert (binding["type"], binding["authLevel"]) == ("httpTrigger", "FUNCTION"), name
        outputs = [b for b in functions[name]["bindings"] if b["direction"] == "OUT"]
        assert outputs == [{"direction": "OUT", "type": "http", "name": "$return"}]
    assert trigger_of(indexed(SERVICEBUS)["repair_sweep"])["schedule"] == "*/30 * * * * *"


def test_without_a_coordinator_only_http_is_registered() -> None:
    assert set(indexed({"DAGQ_STORE": "sqlite:/tmp/x.db"})) == ALWAYS
    assert set(indexed({**AZURE, "DAGQ_COORDINATOR_TRIGGER": "none"})) == ALWAYS


@pytest.mark.parametrize(("env", "expected"), [
    ({}, "none"), (AZURE, "storage_queue"), ({**AZURE, "DAGQ_QUEUES": "sb://ns"}, "servicebus"),
    ({**AZURE, "DAGQ_COORDINATOR_TRIGGER": " ServiceBus ", "DAGQ_QUEUES": "sb://n"},
     "servicebus"),
])
def test_trigger_defaults_follow_the_store(env: dict[str, str], expected: str) -> None:
    assert coordinator_trigger(env) == expected


@pytest.mark.parametrize(("env", "words"), [
    ({**AZURE, "DAGQ_COORDINATOR_TRIGGER": "eventgrid"}, ["DAGQ_COORDINATOR_TRIGGER",
                                                          "'eventgrid'", "storage_queue"]),
    ({**AZURE, "DAGQ_COORDINATOR_TRIGGER": "servicebus"}, ["DAGQ_QUEUES=sb://NAMESPACE"]),
    ({"DAGQ_STORE": "sqlite:x.db", "DAGQ_COORDINATOR_TRIGGER": "storage_queue"},
     ["azure://ACCOUNT/PREFIX", "'sqlite:x.db'"]),
    ({**STORAGE, "DAGQ_COMPLETION_QUEUE": ""}, ["DAGQ_COMPLETION_QUEUE=ml-prod-completions",
                                                "is not set"]),
    ({**STORAGE, "DAGQ_COMPLETION_QUEUE": "dagq-completions"},
     ["'dagq-completions'", "DAGQ_COMPLETION_QUEUE=ml-prod-completions"]),
], ids=["unknown", "sb-without-queues", "queue-on-sqlite", "queue-missing", "queue-wrong"])
def test_bad_registration_settings_fail_at_start_up(env: dict[str, str],
                                                    words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        build_blueprints(env)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize(("env", "coordinator"), [
    (SERVICEBUS, "coordinator_servicebus"), (STORAGE, "coordinator_queue"),
    ({"DAGQ_STORE": "sqlite:.dagq/dagq.db"}, None)])
def test_function_app_module_registers_per_app_setting(env: dict[str, str],
                                                       coordinator: str | None) -> None:
    script = ("import json, function_app\n"
              "print(json.dumps([f.get_function_name() "
              "for f in function_app.app.get_functions()]))")
    clean = {k: v for k, v in __import__("os").environ.items() if not k.startswith("DAGQ_")}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**clean, **env},
                         capture_output=True, text=True, check=True).stdout
    names = set(json.loads(out))
    extra = {coordinator, "repair_sweep"} if coordinator else set()
    assert names == ALWAYS | extra


def openapi() -> dict[str, Any]:
    return dict(json.loads(openapi_document()))


def test_openapi_document_is_valid() -> None:
    doc = openapi()
    validate_openapi(doc)
    assert doc["servers"] == [{"url": "/api"}]
    host = json.loads((ROOT / "host.json").read_text())
    assert host["extensions"]["http"]["routePrefix"] == "api"


def test_every_http_function_matches_openapi() -> None:
    routes: set[tuple[str, str]] = set()
    for function_json in indexed(SERVICEBUS).values():
        binding = trigger_of(function_json)
        if binding["type"] == "httpTrigger":
            route = "/" + binding["route"].replace("{*", "{")  # catch-all: OpenAPI has no '*'
            routes |= {(route, m.lower()) for m in binding["methods"]}
    documented = {(path, method) for path, ops in openapi()["paths"].items()
                  for method in ops if method in ("get", "post", "put", "patch", "delete")}
    assert routes == documented


def test_every_http_function_is_an_endpoint_of_the_wire_contract() -> None:
    registered = set()
    for name, function_json in indexed(SERVICEBUS).items():
        binding = trigger_of(function_json)
        if binding["type"] == "httpTrigger":
            registered |= {(name, m.upper(), binding["route"]) for m in binding["methods"]}
    assert registered == {(e.name, e.method, e.route) for e in http.ENDPOINTS}
    operations = {(path, method.upper()): op["operationId"]
                  for path, ops in openapi()["paths"].items() for method, op in ops.items()}
    for e in http.ENDPOINTS:  # the client and the document name each route the same way
        assert operations[("/" + e.route.replace("{*", "{"), e.method)] == e.operation, e


def test_openapi_operations_declare_their_path_parameters_and_errors() -> None:
    doc = openapi()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            params = {p.get("$ref", "").rsplit("/", 1)[-1] or p["name"]
                      for p in op.get("parameters", [])}
            if "{id}" in path:
                assert "WorkflowId" in params, (path, method)
            if method == "post" and "requestBody" in op:
                assert {"400", "413", "415"} <= set(op["responses"]), path


SERVICE_BUS_OPTIONS = {
    "prefetchCount", "autoCompleteMessages", "maxAutoLockRenewalDuration", "maxConcurrentCalls",
    "maxConcurrentSessions", "maxMessageBatchSize", "minMessageBatchSize", "maxBatchWaitTime",
    "sessionIdleTimeout", "clientRetryOptions", "transportType", "webProxy",
    "enableCrossEntityTransactions", "maxConcurrentCallsPerSession",
}
"""``ServiceBusOptions`` of the Service Bus extension 5.x (the bundle's): Azure/azure-sdk-for-net,
sdk/servicebus/Microsoft.Azure.WebJobs.Extensions.ServiceBus/src/Config/ServiceBusOptions.cs."""
QUEUES_OPTIONS = {"batchSize", "newBatchThreshold", "maxPollingInterval", "visibilityTimeout",
                  "maxDequeueCount", "messageEncoding"}
"""``QueuesOptions`` of the Storage queues extension 5.x (host.json ``extensions.queues``)."""


def test_host_json() -> None:
    host = json.loads((ROOT / "host.json").read_text())
    assert host["version"] == "2.0"
    assert host["extensionBundle"] == {"id": "Microsoft.Azure.Functions.ExtensionBundle",
                                       "version": "[4.*, 5.0.0)"}
    assert host["functionTimeout"] == "00:10:00"
    sb = host["extensions"]["serviceBus"]
    assert sb["autoCompleteMessages"] is True
    assert set(sb) <= SERVICE_BUS_OPTIONS, set(sb) - SERVICE_BUS_OPTIONS
    # a batched session trigger runs one session at a time: these would only mislead
    assert not {"maxConcurrentCalls", "maxConcurrentSessions"} & set(sb)
    queues = host["extensions"]["queues"]
    assert set(queues) <= QUEUES_OPTIONS, set(queues) - QUEUES_OPTIONS
    assert (queues["batchSize"], queues["newBatchThreshold"]) == (1, 0)
    assert queues["messageEncoding"] == "base64"  # what the Storage queue backend writes
    sampling = host["logging"]["applicationInsights"]["samplingSettings"]
    assert sampling["isEnabled"] is True and "Exception" in sampling["excludedTypes"]


def test_local_settings_example_lists_and_explains_every_setting() -> None:
    doc = json.loads((ROOT / "local.settings.example.json").read_text())
    values, descriptions = doc["Values"], doc["_descriptions"]
    assert set(values) == set(descriptions)
    assert all(isinstance(v, str) for v in values.values())
    assert all(len(d) > 20 for d in descriptions.values())
    dagq = {"DAGQ_" + f.name.upper() for f in fields(Settings)}
    functions_only = {"DAGQ_COORDINATOR_TRIGGER", "DAGQ_COMPLETION_QUEUE", "DAGQ_SWEEP_SCHEDULE"}
    assert dagq | functions_only <= set(values)
    assert values["AzureWebJobsStorage"] == "UseDevelopmentStorage=true"
    Settings.from_env(values)  # every example value is valid
    assert set(indexed(values)) == ALWAYS | {"coordinator_queue", "repair_sweep"}


def test_requirements_cover_the_package_dependencies() -> None:
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    required = {line.split(">=")[0].strip().lower() for line in lines
                if line.strip() and not line.startswith("#")}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["azure"]
    assert {d.split(">=")[0].strip().lower() for d in deps} <= required
    assert "azure-functions" in required


def test_funcignore_keeps_the_app_and_drops_the_rest() -> None:
    ignored = {line.strip() for line in (ROOT / ".funcignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".venv", "node_modules", "tests", ".dagq", "infra", "workers", "bench",
            "docs"} <= ignored
    assert not ignored & {"shared", "function_app.py", "host.json", "requirements.txt"}


def test_blueprints_are_built_fresh_each_time() -> None:
    first, second = build_blueprints(STORAGE), build_blueprints(STORAGE)
    assert all(a is not b for a, b in zip(first, second, strict=True))
    assert isinstance(first[0], func.Blueprint)

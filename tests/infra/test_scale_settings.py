"""Scale settings of the Function App deployment: the Flex Consumption instance cap and the
Service Bus rights the scale controller needs.

Sources (also cited in infra/main.bicep and docs/deploy.md):

- maximumInstanceCount: "Currently the lowest maximum instance count value is 1, and the
  highest supported maximum instance count value is 1000"; it "applies to on-demand
  instances in each per-function scale group (function group) rather than to the app's
  combined instances" (https://learn.microsoft.com/azure/azure-functions/event-driven-scaling#limit-scale-out);
  REST API description "The maximum number of on demand instances per function group"
  (https://github.com/Azure/azure-rest-api-specs/pull/45083). Values below 40 were enabled
  region by region (https://github.com/Azure/azure-functions-host/issues/10523), so the
  default is 40, which every region accepts.
- Service Bus scaling: "use Manage rights on resources for the most efficient scaling.
  With Listen rights, scaling reverts to incremental scale"
  (https://learn.microsoft.com/azure/azure-functions/functions-target-based-scaling#service-bus-queues-and-topics);
  with RBAC, Manage is Azure Service Bus Data Owner, which can be scoped to one queue
  (https://learn.microsoft.com/azure/service-bus-messaging/service-bus-managed-service-identity#understand-service-bus-rbac-scope-levels).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dagq.backends.azure.naming import parse_store_url
from tests.infra.bicep_eval import Evaluator, Sym, Templates, body_of, parse, path_of
from tests.infra.builtin_roles import BUILT_IN_ROLES

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"

DOCUMENTED_RANGE = (1, 1000)
DEPLOYABLE_DEFAULT = 40
SB_OWNER = BUILT_IN_ROLES["Azure Service Bus Data Owner"]


@pytest.fixture(scope="module")
def templates() -> Templates:
    names = ("main.bicep", "modules/functionapp.bicep", "modules/role-assignments.bicep",
             "modules/servicebus.bicep")
    return {name: parse((INFRA / name).read_text()) for name in names}


def _bounds(template: dict[str, Any], param: str) -> tuple[Any, Any]:
    decorators = {d["type"]: d.get("argument")
                  for d in template["parameters"][param].get("decorators", [])}
    return decorators.get("min_value"), decorators.get("max_value")


def _parameters_file() -> dict[str, Any]:
    values: dict[str, dict[str, Any]] = json.loads(
        (INFRA / "main.parameters.json").read_text())
    return values["parameters"]


def _true(node: Any, ev: Evaluator) -> bool:
    """A module condition, with the `&&` and `||` the shared evaluator leaves symbolic."""
    op = node.get("operator", {}) if isinstance(node, dict) else {}
    if op.get("type") in ("and", "or"):
        left, right = (_true(op["operands"][k], ev) for k in ("operand_1", "operand_2"))
        return (left and right) if op["type"] == "and" else (left or right)
    value = ev(node)
    assert not isinstance(value, Sym), f"condition left unresolved: {node}"
    return bool(value)


# ---------------------------------------------------------------- instance cap


def test_instance_cap_defaults_to_a_value_every_region_accepts(templates: Templates) -> None:
    main = templates["main.bicep"]
    assert main["parameters"]["maximumInstanceCount"]["default"] == DEPLOYABLE_DEFAULT
    assert _parameters_file()["maximumInstanceCount"]["value"] == DEPLOYABLE_DEFAULT


@pytest.mark.parametrize("file", ["main.bicep", "modules/functionapp.bicep"])
def test_instance_cap_is_bounded_by_the_documented_range(templates: Templates,
                                                         file: str) -> None:
    assert _bounds(templates[file], "maximumInstanceCount") == DOCUMENTED_RANGE


def test_instance_cap_reaches_the_site_unchanged(templates: Templates) -> None:
    main = templates["main.bicep"]
    params = body_of(main["modules"]["functionApp"]["config"])["params"]
    assert params["maximumInstanceCount"] == "maximumInstanceCount"
    template = templates["modules/functionapp.bicep"]
    for value in (1, DEPLOYABLE_DEFAULT, 1000):
        site = Evaluator(template, {"maximumInstanceCount": value})(
            template["resources"]["site"]["config"])
        scale = site["properties"]["functionAppConfig"]["scaleAndConcurrency"]
        assert scale["maximumInstanceCount"] == value
        # Always-ready instances are not counted against the cap: none are configured.
        assert "alwaysReady" not in scale


def test_parameters_file_stays_within_the_bounds(templates: Templates) -> None:
    low, high = _bounds(templates["main.bicep"], "maximumInstanceCount")
    assert low <= _parameters_file()["maximumInstanceCount"]["value"] <= high


# ---------------------------------------------------------------- Service Bus scale rights


def _scale_module(templates: Templates) -> dict[str, Any]:
    module: dict[str, Any] = templates["main.bicep"]["modules"]["functionServiceBusScaleRoles"]
    return module


def test_function_identity_gets_data_owner_on_the_completion_queue_only(
        templates: Templates) -> None:
    main = templates["main.bicep"]
    assert main["variables"]["roles"]["value"]["serviceBusDataOwner"] == SB_OWNER
    module = _scale_module(templates)
    assert module["detail"]["path"] == "modules/role-assignments.bicep"
    params = body_of(module["config"])["params"]
    assert params["scopeKind"] == "servicebusqueue"
    assert path_of(params["principalId"]) == [
        "identities", "outputs", "FUNCTION_IDENTITY_PRINCIPAL_ID"]
    assert [path_of(r) for r in params["roleDefinitionIds"]] == [
        ["roles", "serviceBusDataOwner"]]
    assert "serviceBus" in body_of(module["config"])["dependsOn"], "the queue must exist first"
    # The queue is the completion queue the coordinator trigger reads, by the store's layout
    # and by the name servicebus.bicep creates.
    for prefix in ("dagq", "my-run"):
        queue = Evaluator(main, {"storePrefix": prefix})(params["queueName"])
        sb = templates["modules/servicebus.bicep"]
        created = Evaluator(sb, {"storePrefix": prefix})(
            sb["resources"]["completions"]["config"])["name"]
        assert queue == created == parse_store_url(f"azure://acct123/{prefix}").queue(
            "completions")


@pytest.mark.parametrize("use_service_bus", [True, False])
def test_scale_rights_follow_the_service_bus_switch(templates: Templates,
                                                    use_service_bus: bool) -> None:
    main = templates["main.bicep"]
    condition = _scale_module(templates)["config"].get("condition")
    assert condition is not None
    assert _true(condition, Evaluator(main, {"useServiceBus": use_service_bus})) is use_service_bus
    # The Function App starts only after the grant (its first scale decision needs it).
    depends = body_of(main["modules"]["functionApp"]["config"])["dependsOn"]
    assert "functionServiceBusScaleRoles" in depends


def test_data_owner_is_granted_nowhere_else(templates: Templates) -> None:
    for name, module in templates["main.bicep"]["modules"].items():
        if module["detail"]["path"] != "modules/role-assignments.bicep":
            continue
        params = body_of(module["config"])["params"]
        roles = [path_of(r) for r in params["roleDefinitionIds"]]
        if ["roles", "serviceBusDataOwner"] in roles:
            assert name == "functionServiceBusScaleRoles"
            assert params["scopeKind"] == "servicebusqueue", "never at namespace scope"


@pytest.mark.parametrize("kind", ["storage", "servicebus", "servicebusqueue", "appinsights"])
def test_each_scope_kind_creates_its_assignments_on_its_own_scope(templates: Templates,
                                                                  kind: str) -> None:
    template = templates["modules/role-assignments.bicep"]
    ev = Evaluator(template, {"scopeKind": kind, "queueName": "dagq-completions",
                              "roleDefinitionIds": [SB_OWNER]})
    created = {}
    for name, res in template["resources"].items():
        if res["type"] == "Microsoft.Authorization/roleAssignments":
            created[name] = ev(res["config"])
    fired = {name: items for name, items in created.items() if items}
    assert len(fired) == 1, f"{kind}: {sorted(fired)}"
    (assignment,) = next(iter(fired.values()))
    expected_scope = {"storage": "storage", "servicebus": "namespace",
                      "servicebusqueue": "queue", "appinsights": "appInsights"}[kind]
    assert assignment["scope"] == expected_scope
    if kind == "servicebusqueue":
        queue = template["resources"]["queue"]
        assert queue["existing"] is True
        assert queue["type"] == "Microsoft.ServiceBus/namespaces/queues"
        assert body_of(queue["config"])["parent"] == "namespace"
        assert ev(body_of(queue["config"])["name"]) == "dagq-completions"

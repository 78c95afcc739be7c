"""Checks of the Bicep deployment in infra/: syntax, policy scan and security properties.

No Bicep compiler runs here, so every `.bicep` file is parsed with pycep-parser, scanned
with checkov (bicep framework, no network) and then inspected; bicep_eval resolves the
parameter-dependent parts (app settings, queue names) for both values of `useServiceBus`.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dagq.backends.azure.naming import fold, parse_queues_url, parse_store_url
from dagq.core.limits import STORE_PREFIX
from dagq.core.rules import queue_problem
from dagq.functions import (
    completion_queue_name,
    coordinator_queue,
    coordinator_sb,
    coordinator_trigger,
)
from tests.infra.bicep_eval import Evaluator, Sym, Templates, body_of, parse, path_of
from tests.infra.builtin_roles import BUILT_IN_ROLES, MANAGEMENT_ROLES, ROLE_OF_KEY

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
BICEP_FILES = sorted(INFRA.rglob("*.bicep"))

FORBIDDEN_ROLES = {BUILT_IN_ROLES[name]: name for name in MANAGEMENT_ROLES}
BLOB_OWNER = BUILT_IN_ROLES["Storage Blob Data Owner"]
BLOB_CONTRIBUTOR = BUILT_IN_ROLES["Storage Blob Data Contributor"]
QUEUE_CONTRIBUTOR = BUILT_IN_ROLES["Storage Queue Data Contributor"]
TABLE_CONTRIBUTOR = BUILT_IN_ROLES["Storage Table Data Contributor"]
SB_SENDER = BUILT_IN_ROLES["Azure Service Bus Data Sender"]
SB_RECEIVER = BUILT_IN_ROLES["Azure Service Bus Data Receiver"]
METRICS_PUBLISHER = BUILT_IN_ROLES["Monitoring Metrics Publisher"]
GUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)

# Text that would put a secret into a template: key listings, connection strings, SAS.
SECRET_PATTERNS = re.compile(
    r"listKeys|listConnectionStrings|listAccountSas|listServiceSas|AccountKey|"
    r"SharedAccessKey|SharedAccessSignature|DefaultEndpointsProtocol|primaryKey|"
    r"secondaryKey|WEBSITE_CONTENTAZUREFILECONNECTIONSTRING",
    re.IGNORECASE,
)


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def templates() -> Templates:
    """Every template parsed once, keyed by its path relative to infra/."""
    return {str(p.relative_to(INFRA)): parse(p.read_text()) for p in BICEP_FILES}


def _resource(templates: Templates, file: str, name: str) -> dict[str, Any]:
    body: dict[str, Any] = body_of(templates[file]["resources"][name]["config"])
    return body


@pytest.fixture(scope="module")
def checkov_report() -> dict[str, Any]:
    """One checkov run over infra/ (bicep framework, offline) for the whole module."""
    exe = shutil.which("checkov", path=str(Path(sys.executable).parent)) or shutil.which("checkov")
    if exe is None:
        pytest.fail("checkov is not installed: run `.venv/bin/pip install checkov`")
    cmd = [exe, "--skip-download", "--framework", "bicep", "-d", str(INFRA), "-o", "json"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"checkov printed no JSON (exit {run.returncode}): {run.stderr[-2000:]}")
    result: dict[str, Any] = report[0] if isinstance(report, list) else report
    return result


# ---------------------------------------------------------------- syntax and policy


def test_infra_has_the_expected_templates() -> None:
    names = {str(p.relative_to(INFRA)) for p in BICEP_FILES}
    assert {
        "main.bicep",
        "modules/storage.bicep",
        "modules/servicebus.bicep",
        "modules/functionapp.bicep",
        "modules/role-assignments.bicep",
    } <= names


@pytest.mark.parametrize("path", BICEP_FILES, ids=lambda p: str(p.relative_to(INFRA)))
def test_every_bicep_file_parses(path: Path) -> None:
    try:
        parse(path.read_text())
    except Exception as exc:  # pycep raises lark errors of several classes
        pytest.fail(f"{path.relative_to(ROOT)} does not parse: {exc}")


def test_checkov_passes_without_parsing_errors(checkov_report: dict[str, Any]) -> None:
    summary = checkov_report["summary"]
    failed = [
        f"{r['check_id']} {r['file_path']} {r['resource']}: {r['check_name']}"
        for r in checkov_report["results"]["failed_checks"]
    ]
    assert summary["parsing_errors"] == 0, checkov_report["results"]["parsing_errors"]
    assert summary["failed"] == 0, "\n".join(failed)
    assert summary["passed"] >= 10, f"checkov scanned almost nothing: {summary}"


def test_checkov_skips_are_inline_justified_and_used(checkov_report: dict[str, Any]) -> None:
    comments: set[tuple[str, str]] = set()
    for path in BICEP_FILES:
        for match in re.finditer(r"//\s*checkov:skip=([A-Z0-9_]+)(?::(.*))?", path.read_text()):
            reason = (match.group(2) or "").strip()
            assert len(reason) >= 20, f"{path.name}: skip {match.group(1)} needs a reason"
            comments.add(("/" + str(path.relative_to(INFRA)), match.group(1)))
    skipped = {(r["file_path"], r["check_id"]) for r in checkov_report["results"]["skipped_checks"]}
    assert skipped == comments, f"unused skips: {comments - skipped}; other: {skipped - comments}"


# ---------------------------------------------------------------- storage


def test_storage_account_is_identity_only_and_encrypted_in_transit(templates: Templates) -> None:
    props = _resource(templates, "modules/storage.bicep", "account")["properties"]
    assert props["allowSharedKeyAccess"] is False
    assert props["defaultToOAuthAuthentication"] is True
    assert props["minimumTlsVersion"] == "TLS1_2"
    assert props["supportsHttpsTrafficOnly"] is True
    assert props["allowBlobPublicAccess"] is False


@pytest.mark.parametrize("use_service_bus", [True, False])
def test_storage_names_follow_the_store_layout(templates: Templates, use_service_bus: bool) -> None:
    template = templates["modules/storage.bicep"]
    ev = Evaluator(
        template,
        {
            "storePrefix": "my-run",
            "useServiceBus": use_service_bus,
            "hardwareClasses": ["cpu", "gpu"],
            "packageContainerName": "pkg",
        },
    )
    names = {
        res: [body["name"] for body in ev(template["resources"][res]["config"])]
        for res in ("containers", "tables", "queues")
    }
    store = parse_store_url("azure://stdagq/my-run")  # the names the Azure backend uses
    assert names["containers"] == [store.state_container, store.outputs_container, "pkg"]
    assert (
        names["tables"]
        == [store.index_table, store.records_table]
        == ["myrunindex", "myrunrecords"]
    )
    storage_queues = [
        store.queue("completions"),
        store.deadletter_queue,
        store.queue("cpu"),
        store.queue("gpu"),
    ]
    assert names["queues"] == ([] if use_service_bus else storage_queues)
    for container in ev(template["resources"]["containers"]["config"]):
        assert container["properties"]["publicAccess"] == "None"


# ---------------------------------------------------------------- service bus


def test_service_bus_accepts_entra_id_only(templates: Templates) -> None:
    props = _resource(templates, "modules/servicebus.bicep", "namespace")["properties"]
    assert props["disableLocalAuth"] is True
    assert props["minimumTlsVersion"] == "1.2"


def test_service_bus_queues_have_sessions_and_duplicate_detection(templates: Templates) -> None:
    template = templates["modules/servicebus.bicep"]
    ev = Evaluator(
        template,
        {"storePrefix": "dagq", "hardwareClasses": ["cpu", "gpu"], "lockDurationSeconds": 90},
    )
    completions = ev(template["resources"]["completions"]["config"])
    tasks = ev(template["resources"]["taskQueues"]["config"])
    store = parse_store_url("azure://stdagq/dagq")
    assert completions["name"] == store.queue("completions") == "dagq-completions"
    assert completions["properties"]["requiresSession"] is True
    assert [q["name"] for q in tasks] == [store.queue("cpu"), store.queue("gpu")]
    for queue in [completions, *tasks]:
        assert queue["properties"]["requiresDuplicateDetection"] is True
        assert queue["properties"]["maxDeliveryCount"] == Sym("maxDeliveryCount")
    # the batch trigger renews no lock: the completion queue has the longest one
    assert completions["properties"]["lockDuration"] == "PT5M"
    assert [q["properties"]["lockDuration"] for q in tasks] == ["PT90S", "PT90S"]


# ---------------------------------------------------------------- function app


def _settings(templates: Templates, use_service_bus: bool) -> dict[str, Any]:
    template = templates["modules/functionapp.bicep"]
    ev = Evaluator(
        template,
        {
            "useServiceBus": use_service_bus,
            "storageAccountName": "stdagq",
            "storePrefix": "dagq",
            "serviceBusNamespaceName": "sb-dagq-0123456789abc",
        },
    )
    site = ev(template["resources"]["site"]["config"])
    pairs = site["properties"]["siteConfig"]["appSettings"]
    names = [p["name"] for p in pairs]
    assert len(names) == len(set(names)), f"duplicate app settings: {names}"
    return {p["name"]: p["value"] for p in pairs}


def test_function_app_is_https_only_with_modern_tls(templates: Templates) -> None:
    site = _resource(templates, "modules/functionapp.bicep", "site")
    assert site["properties"]["httpsOnly"] is True
    assert site["properties"]["siteConfig"]["minTlsVersion"] == "1.2"
    assert site["properties"]["siteConfig"]["ftpsState"] == "Disabled"
    assert site["identity"]["type"] == "UserAssigned"
    assert site["properties"]["functionAppConfig"]["runtime"] == {
        "name": "python",
        "version": "3.11",
    }
    for policy in ("ftpPolicy", "scmPolicy"):
        assert _resource(templates, "modules/functionapp.bicep", policy)["properties"] == {
            "allow": False
        }


def _decorators(templates: Templates, param: str) -> dict[str, Any]:
    spec = templates["main.bicep"]["parameters"][param]
    return {d["type"]: d.get("argument") for d in spec.get("decorators", [])}


def test_flex_maximum_instance_count_is_within_the_documented_range(
        templates: Templates) -> None:
    # "Currently the lowest maximum instance count value is 1, and the highest supported
    # maximum instance count value is 1000"; it applies per function scale group.
    # https://learn.microsoft.com/azure/azure-functions/event-driven-scaling#limit-scale-out
    bounds = _decorators(templates, "maximumInstanceCount")
    assert (bounds["min_value"], bounds["max_value"]) == (1, 1000)
    default = templates["main.bicep"]["parameters"]["maximumInstanceCount"]["default"]
    file_value = json.loads((INFRA / "main.parameters.json").read_text())["parameters"][
        "maximumInstanceCount"]["value"]
    assert 1 <= default <= 1000 and 1 <= file_value <= 1000


def test_name_parameters_follow_dagqs_naming_rules(templates: Templates) -> None:
    # Bicep has no pattern decorator (Azure/bicep#9229), so the bounds it can express are
    # pinned to dagq's, and every shipped value is checked against dagq's own rules.
    bounds = _decorators(templates, "storePrefix")
    assert (bounds["min_length"], bounds["max_length"]) == STORE_PREFIX
    values = json.loads((INFRA / "main.parameters.json").read_text())["parameters"]
    params = templates["main.bicep"]["parameters"]
    for prefix in (params["storePrefix"]["default"], values["storePrefix"]["value"]):
        assert fold(prefix) == prefix, f"store prefix {prefix!r} is not in canonical form"
        parse_store_url(f"azure://acct123/{prefix}")
    classes = [*params["hardwareClasses"]["default"], *values["hardwareClasses"]["value"]]
    for cls in classes:
        assert queue_problem(cls) is None, queue_problem(cls)
    assert "1-36" in params["hardwareClasses"]["decorators"][0]["argument"]


def test_instances_are_capped_per_scale_group_by_default(templates: Templates) -> None:
    site = _resource(templates, "modules/functionapp.bicep", "site")
    scale = site["properties"]["functionAppConfig"]["scaleAndConcurrency"]
    assert scale["maximumInstanceCount"] == "maximumInstanceCount"
    assert "alwaysReady" not in scale, "always-ready instances come on top of the maximum"
    assert templates["main.bicep"]["parameters"]["maximumInstanceCount"]["default"] == 40
    plan = _resource(templates, "modules/functionapp.bicep", "plan")
    assert plan["sku"] == {"tier": "FlexConsumption", "name": "FC1"}


@pytest.mark.parametrize("use_service_bus", [True, False])
def test_app_settings_are_identity_based_without_secrets(
    templates: Templates, use_service_bus: bool
) -> None:
    settings = _settings(templates, use_service_bus)
    assert settings["AzureWebJobsStorage__accountName"] == "stdagq"
    assert settings["AzureWebJobsStorage__credential"] == "managedidentity"
    assert settings["AZURE_CLIENT_ID"] == Sym("identityClientId")
    assert settings["DAGQ_STORE"] == "azure://stdagq/dagq"
    assert "AzureWebJobsStorage" not in settings, "a plain AzureWebJobsStorage is a key"
    for name, value in settings.items():
        assert not SECRET_PATTERNS.search(f"{name}={value}"), f"{name} looks like a secret"
        if re.search(r"connection_?string", name, re.IGNORECASE):
            # Telemetry routing only; ingestion needs the Entra ID token (local auth off).
            assert name == "APPLICATIONINSIGHTS_CONNECTION_STRING", name
            assert value == Sym("appInsights.properties.ConnectionString")
    assert settings["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"].endswith("Authorization=AAD")


def test_service_bus_switch_selects_the_coordinator_trigger(templates: Templates) -> None:
    with_sb, without_sb = _settings(templates, True), _settings(templates, False)
    assert with_sb["DAGQ_COORDINATOR_TRIGGER"] == "servicebus"
    assert with_sb["DAGQ_QUEUES"] == "sb://sb-dagq-0123456789abc"
    assert with_sb["ServiceBusConnection__fullyQualifiedNamespace"] == Sym(
        "serviceBusFullyQualifiedNamespace"
    )
    assert with_sb["ServiceBusConnection__credential"] == "managedidentity"
    assert without_sb["DAGQ_COORDINATOR_TRIGGER"] == "storage_queue"
    assert not [n for n in without_sb if n == "DAGQ_QUEUES" or n.startswith("ServiceBus")]


@pytest.mark.parametrize("use_service_bus", [True, False])
def test_function_app_code_accepts_the_settings(
    templates: Templates, use_service_bus: bool
) -> None:
    settings = _settings(templates, use_service_bus)
    expected = "servicebus" if use_service_bus else "storage_queue"
    assert coordinator_trigger(settings) == expected
    assert settings["DAGQ_COMPLETION_QUEUE"] == completion_queue_name(settings)
    # The triggers' connection names resolve to identity-based settings.
    assert f"{coordinator_queue.CONNECTION}__accountName" in settings
    if use_service_bus:
        assert f"{coordinator_sb.CONNECTION}__fullyQualifiedNamespace" in settings
    if use_service_bus:
        assert (
            parse_queues_url(settings["DAGQ_QUEUES"])
            == "sb-dagq-0123456789abc.servicebus.windows.net"
        )


def test_service_bus_switch_removes_the_namespace(templates: Templates) -> None:
    modules = templates["main.bicep"]["modules"]
    assert modules["serviceBus"]["config"]["condition"] == "useServiceBus"
    for name, module in modules.items():
        body, condition = body_of(module["config"]), module["config"].get("condition")
        if "serviceBus" in json.dumps(body) and condition != "useServiceBus":
            # Outside the switch only as guarded values: useServiceBus ? ... : ''
            for key, value in body["params"].items():
                if "serviceBus" in json.dumps(value) and key != "useServiceBus":
                    guard = value.get("operator", {}).get("operands", {}).get("condition")
                    assert guard == "useServiceBus", f"{name} passes {key} without the switch"
    # The same switch drives the Storage queues and the app settings.
    for name in ("storage", "functionApp"):
        assert body_of(modules[name]["config"])["params"]["useServiceBus"] == "useServiceBus"


# ---------------------------------------------------------------- roles


def _grants(templates: Templates) -> dict[tuple[str, str], set[str]]:
    """(identity, scope kind) -> role ids, from main.bicep's role-assignment modules."""
    main = templates["main.bicep"]
    roles = main["variables"]["roles"]["value"]
    grants: dict[tuple[str, str], set[str]] = {}
    for module in main["modules"].values():
        if module["detail"]["path"] != "modules/role-assignments.bicep":
            continue
        params = body_of(module["config"])["params"]
        principal = path_of(params["principalId"])
        assert principal and principal[0] == "identities", params["principalId"]
        role_names = [path_of(r) or [] for r in params["roleDefinitionIds"]]
        role_ids = {roles[name[-1]] for name in role_names if name[:1] == ["roles"]}
        assert len(role_ids) == len(role_names), f"roles not from the roles variable: {params}"
        key = (principal[-1], params["scopeKind"])
        grants[key] = grants.get(key, set()) | role_ids
    return grants


def test_each_identity_gets_exactly_the_data_roles_it_needs(templates: Templates) -> None:
    assert _grants(templates) == {
        ("FUNCTION_IDENTITY_PRINCIPAL_ID", "storage"): {
            BLOB_OWNER,
            QUEUE_CONTRIBUTOR,
            TABLE_CONTRIBUTOR,
        },
        ("FUNCTION_IDENTITY_PRINCIPAL_ID", "servicebus"): {SB_SENDER, SB_RECEIVER},
        ("FUNCTION_IDENTITY_PRINCIPAL_ID", "servicebusqueue"): {
            BUILT_IN_ROLES["Azure Service Bus Data Owner"]
        },
        ("FUNCTION_IDENTITY_PRINCIPAL_ID", "appinsights"): {METRICS_PUBLISHER},
        ("WORKER_IDENTITY_PRINCIPAL_ID", "storage"): {
            BLOB_CONTRIBUTOR,
            QUEUE_CONTRIBUTOR,
            TABLE_CONTRIBUTOR,
        },
        ("WORKER_IDENTITY_PRINCIPAL_ID", "servicebus"): {SB_SENDER, SB_RECEIVER},
    }


def test_every_role_id_is_pinned_by_its_built_in_role_name(templates: Templates) -> None:
    roles = templates["main.bicep"]["variables"]["roles"]["value"]
    assert set(roles) == set(ROLE_OF_KEY), "a role was added: pin it in ROLE_OF_KEY"
    for key, role_id in roles.items():
        name = ROLE_OF_KEY[key]
        assert role_id == BUILT_IN_ROLES[name], (
            f"roles.{key} is {role_id}, but the built-in role {name!r} has the id "
            f"{BUILT_IN_ROLES[name]}")


def test_every_guid_in_the_templates_is_a_built_in_role_id() -> None:
    known = set(BUILT_IN_ROLES.values())
    for path in BICEP_FILES:
        for found in GUID.findall(path.read_text()):
            assert found.lower() in known, f"{path.name}: {found} is not a built-in role id"


def test_no_template_mentions_a_management_role() -> None:
    for path in BICEP_FILES:
        text = path.read_text().lower()
        for role_id, role in FORBIDDEN_ROLES.items():
            assert role_id not in text, f"{path.name} grants {role}"


def test_role_assignments_have_guid_names_and_service_principals(templates: Templates) -> None:
    found = 0
    for file, template in templates.items():
        for name, res in template.get("resources", {}).items():
            if res["type"] != "Microsoft.Authorization/roleAssignments":
                continue
            found += 1
            body = body_of(res["config"])
            assert body["name"]["function"]["type"] == "guid", f"{file}:{name}"
            assert body["properties"]["principalType"] == "ServicePrincipal", f"{file}:{name}"
            role = body["properties"]["roleDefinitionId"]["function"]
            assert role["type"] == "subscription_resource_id", f"{file}:{name}"
    assert found == 4


# ---------------------------------------------------------------- outputs and parameters


def test_outputs_are_upper_snake_and_hold_no_secrets(templates: Templates) -> None:
    for file, template in templates.items():
        for name, output in template.get("outputs", {}).items():
            assert re.fullmatch(r"[A-Z][A-Z0-9_]*", name), f"{file}: output {name}"
            text = json.dumps(output["value"])
            assert not SECRET_PATTERNS.search(text), f"{file}: output {name} holds a secret"
            assert "connectionstring" not in text.lower(), f"{file}: output {name}"
    main_outputs = templates["main.bicep"]["outputs"]
    for required in (
        "DAGQ_STORE",
        "DAGQ_QUEUES",
        "WORKER_IDENTITY_CLIENT_ID",
        "FUNCTION_APP_URL",
        "STORAGE_ACCOUNT_NAME",
        "SERVICEBUS_NAMESPACE",
    ):
        assert required in main_outputs


def test_no_template_text_lists_keys_or_builds_connection_strings() -> None:
    for path in BICEP_FILES:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip().startswith("//"):
                continue
            assert not SECRET_PATTERNS.search(line), f"{path.name}:{number}: {line.strip()}"


def test_parameters_file_matches_main(templates: Templates) -> None:
    data = json.loads((INFRA / "main.parameters.json").read_text())
    assert "deploymentParameters" in data["$schema"]
    declared = templates["main.bicep"]["parameters"]
    for name, entry in data["parameters"].items():
        assert name in declared, f"main.parameters.json sets unknown parameter {name}"
        decorators = {d["type"]: d.get("argument") for d in declared[name]["decorators"]}
        allowed = decorators.get("allowed")
        if allowed is not None:
            assert entry["value"] in allowed, f"{name}={entry['value']} not in {allowed}"
    assert data["parameters"]["useServiceBus"]["value"] in (True, False)

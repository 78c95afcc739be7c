"""Worker deployment artefacts: Dockerfiles, AKS manifests and Azure Batch templates.

Images cannot be built here, so the templates are parsed and checked for the properties the
worker runtime depends on (grace period vs kill timeout, GPU requests and taints, identity,
queue names), and scanned with checkov (run once for the module).
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
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKERS = ROOT / "workers"
AKS = WORKERS / "deploy" / "aks"
BATCH = WORKERS / "deploy" / "batch"
DOCKERFILES = [WORKERS / "Dockerfile", WORKERS / "Dockerfile.gpu", WORKERS / "Dockerfile.gpu-torch"]
KUSTOMIZE_API = "kustomize.config.k8s.io/v1beta1"
GUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
Doc = dict[str, Any]


def _load_yaml(path: Path) -> list[Doc]:
    with path.open(encoding="utf-8") as stream:  # a stream makes parse errors name the file
        return [d for d in yaml.safe_load_all(stream) if d is not None]


def _manifests(directory: Path) -> list[Doc]:
    """Every Kubernetes object in the YAML files of `directory` (not recursive)."""
    docs = [d for p in sorted(directory.glob("*.yaml")) for d in _load_yaml(p)]
    return [d for d in docs if d.get("apiVersion") != KUSTOMIZE_API]


def _by_kind(docs: list[Doc], kind: str) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _env(container: Doc) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def _mount(container: Doc, path: str) -> Doc:
    mount: Doc = next(m for m in container["volumeMounts"] if m["mountPath"] == path)
    return mount


def _worker(deployment: Doc) -> Doc:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, f"{deployment['metadata']['name']}: one worker container"
    worker: Doc = containers[0]
    return worker


BASE = _manifests(AKS / "base")
DEPLOYMENTS = _by_kind(BASE, "Deployment")
CONFIG = _by_kind(BASE, "ConfigMap")["dagq-worker-config"]["data"]
TEMPLATE_FILES = sorted(
    [*AKS.rglob("*.yaml"), *BATCH.glob("*.json")], key=lambda p: str(p.relative_to(ROOT))
)


def _store_account_prefix() -> tuple[str, str]:
    match = re.fullmatch(r"azure://([a-z0-9]+)/([a-z0-9-]+)", CONFIG["DAGQ_STORE"])
    assert match, f"DAGQ_STORE in configmap.yaml is not azure://ACCOUNT/PREFIX: {CONFIG}"
    return match[1], match[2]


@pytest.mark.parametrize("path", TEMPLATE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_template_parses(path: Path) -> None:
    if path.suffix == ".json":
        assert isinstance(json.loads(path.read_text(encoding="utf-8")), dict)
        return
    docs = _load_yaml(path)
    assert docs, f"{path} holds no YAML document"
    for doc in docs:
        assert doc.get("apiVersion") and doc.get("kind"), f"{path}: apiVersion/kind missing"
        if doc["apiVersion"] == KUSTOMIZE_API:
            for res in doc.get("resources", []):
                assert (path.parent / res).exists(), f"{path}: resource {res} does not exist"
        elif doc["kind"] != "Namespace":
            assert doc["metadata"].get("namespace") == "dagq", f"{path}: namespace not dagq"


def test_a_deployment_per_hardware_class_each_with_a_pdb() -> None:
    assert set(DEPLOYMENTS) == {"dagq-worker-cpu", "dagq-worker-gpu"}
    pdbs = _by_kind(BASE, "PodDisruptionBudget")
    for name, dep in DEPLOYMENTS.items():
        labels = dep["spec"]["template"]["metadata"]["labels"]
        covering = [
            p
            for p in pdbs.values()
            if p["spec"]["selector"]["matchLabels"].items() <= labels.items()
        ]
        assert len(covering) == 1, f"{name}: expected one PodDisruptionBudget, got {covering}"
        assert "replicas" not in dep["spec"], f"{name}: replicas belong to the ScaledObject"


def test_gpu_deployment_requests_gpus_and_tolerates_the_gpu_taint() -> None:
    dep = DEPLOYMENTS["dagq-worker-gpu"]
    pod, worker = dep["spec"]["template"]["spec"], _worker(dep)
    gpus = int(worker["resources"]["limits"]["nvidia.com/gpu"])
    assert int(worker["resources"]["requests"]["nvidia.com/gpu"]) == gpus
    env = _env(worker)
    slots = int(env["DAGQ_WORKER_CONCURRENCY"]) * int(env["DAGQ_GPUS_PER_TASK"])
    assert 0 < slots <= gpus, f"concurrency x gpus-per-task = {slots} but {gpus} GPUs"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    assert pod["nodeSelector"]["dagq.io/hardware-class"] == "gpu"
    cpu = DEPLOYMENTS["dagq-worker-cpu"]
    assert "nvidia.com/gpu" not in _worker(cpu)["resources"]["limits"]
    assert cpu["spec"]["template"]["spec"]["nodeSelector"]["dagq.io/hardware-class"] == "cpu"


@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
def test_grace_period_covers_the_kill_timeout(name: str) -> None:
    dep = DEPLOYMENTS[name]
    kill_timeout = float(_env(_worker(dep)).get("DAGQ_KILL_TIMEOUT", "600"))
    grace = dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace >= kill_timeout + 30, f"{name}: grace {grace}s < kill timeout {kill_timeout}s + 30"


@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
def test_worker_pods_run_non_root_on_a_read_only_root(name: str) -> None:
    pod = DEPLOYMENTS[name]["spec"]["template"]["spec"]
    worker = _worker(DEPLOYMENTS[name])
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] >= 10000
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    ctx = worker["securityContext"]
    assert ctx["allowPrivilegeEscalation"] is False
    assert ctx["readOnlyRootFilesystem"] is True
    assert ctx["capabilities"]["drop"] == ["ALL"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in worker["volumeMounts"]}
    assert {"/tmp", "/home/dagq"} <= set(mounts), f"{name}: writable dirs not mounted"
    writable = [v for m, v in mounts.items() if not _mount(worker, m).get("readOnly")]
    assert all("emptyDir" in volumes[v] for v in writable)
    assert pod["automountServiceAccountToken"] is False


@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
def test_probes_run_the_worker_check_and_the_image_is_pinned(name: str) -> None:
    worker = _worker(DEPLOYMENTS[name])
    assert _env(worker)["DAGQ_WORKER_QUEUE"]
    for probe, flag in (("livenessProbe", "--check"), ("readinessProbe", "--ready")):
        command = " ".join(worker[probe]["exec"]["command"])
        assert f'dagq worker "$DAGQ_WORKER_QUEUE" {flag}' in command, f"{name} {probe}"
    assert DIGEST.search(worker["image"]), f"{name}: image not pinned by digest"


def test_workers_use_workload_identity() -> None:
    sa = _by_kind(BASE, "ServiceAccount")["dagq-worker"]
    assert GUID.match(sa["metadata"]["annotations"]["azure.workload.identity/client-id"])
    for name, dep in DEPLOYMENTS.items():
        template = dep["spec"]["template"]
        assert template["metadata"]["labels"]["azure.workload.identity/use"] == "true", name
        assert template["spec"]["serviceAccountName"] == "dagq-worker", name


@pytest.mark.parametrize(
    ("overlay", "trigger_type", "target_key"),
    [
        ("keda-storage-queue", "azure-queue", "queueLength"),
        ("keda-servicebus", "azure-servicebus", "messageCount"),
    ],
)
def test_keda_scales_each_class_on_its_task_queue(
    overlay: str, trigger_type: str, target_key: str
) -> None:
    docs = _manifests(AKS / overlay)
    auths = _by_kind(docs, "TriggerAuthentication")
    scaled = _by_kind(docs, "ScaledObject")
    account, prefix = _store_account_prefix()
    assert {s["spec"]["scaleTargetRef"]["name"] for s in scaled.values()} == set(DEPLOYMENTS)
    for obj in scaled.values():
        dep = DEPLOYMENTS[obj["spec"]["scaleTargetRef"]["name"]]
        env = _env(_worker(dep))
        (trigger,) = obj["spec"]["triggers"]
        meta = trigger["metadata"]
        assert trigger["type"] == trigger_type
        assert meta["queueName"] == f"{prefix}-q-{env['DAGQ_WORKER_QUEUE']}"
        assert meta[target_key] == env["DAGQ_WORKER_CONCURRENCY"]
        if trigger_type == "azure-queue":
            assert meta["accountName"] == account
            assert meta.get("queueLengthStrategy", "all") == "all"
        auth = auths[trigger["authenticationRef"]["name"]]
        assert auth["spec"]["podIdentity"]["provider"] == "azure-workload"


def test_servicebus_overlay_points_workers_and_keda_at_the_same_namespace() -> None:
    (kustomization,) = _load_yaml(AKS / "servicebus" / "kustomization.yaml")
    (patch,) = yaml.safe_load(kustomization["patches"][0]["patch"])
    assert patch["path"] == "/data/DAGQ_QUEUES"
    namespace = patch["value"].removeprefix("sb://")
    for obj in _by_kind(_manifests(AKS / "keda-servicebus"), "ScaledObject").values():
        assert obj["spec"]["triggers"][0]["metadata"]["namespace"] == namespace


@pytest.mark.parametrize(
    ("overlay", "trigger_type"), [(".", "azure-queue"), ("servicebus", "azure-servicebus")]
)
def test_kustomize_renders_one_scaledobject_per_deployment(overlay: str, trigger_type: str) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed: kustomize rendering not checked")
    out = subprocess.run(
        [kubectl, "kustomize", str(AKS / overlay)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    scaled = _by_kind(docs, "ScaledObject").values()
    assert sorted(s["spec"]["scaleTargetRef"]["name"] for s in scaled) == sorted(DEPLOYMENTS)
    assert {t["type"] for s in scaled for t in s["spec"]["triggers"]} == {trigger_type}
    config = _by_kind(docs, "ConfigMap")["dagq-worker-config"]["data"]
    assert ("DAGQ_QUEUES" in config) == (trigger_type == "azure-servicebus")


# ---- Dockerfiles ----------------------------------------------------------------------------


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    lines = [ln.strip() for ln in text.splitlines()]
    pairs = [ln.split(None, 1) for ln in lines if ln and not ln.startswith("#")]
    return [(p[0].upper(), p[1] if len(p) > 1 else "") for p in pairs]


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_runtime_stage(path: Path) -> None:
    ins = _instructions(path)
    froms = [i for i, (op, _) in enumerate(ins) if op == "FROM"]
    assert len(froms) >= 2, f"{path.name}: expected a multi-stage build"
    final = ins[froms[-1] :]
    ops = dict(final)  # last value per instruction in the runtime stage
    user = ops["USER"].split(":")[0]
    assert user.isdigit() and int(user) >= 10000, f"{path.name}: USER {user} not a high uid"
    assert 'dagq worker \\"$DAGQ_WORKER_QUEUE\\" --check' in ops["HEALTHCHECK"]
    entrypoint = json.loads(ops["ENTRYPOINT"])
    assert entrypoint[0].endswith("tini") and entrypoint[-2:] == ["/opt/venv/bin/dagq", "worker"]
    assert "COPY --from=build /opt/venv /opt/venv" in [f"{op} {a}" for op, a in final]
    assert not any(op == "COPY" and "--from" not in a for op, a in final), "source in runtime"


def test_cpu_dockerfile_stages_share_one_pinned_slim_python_base() -> None:
    stages = [a.split()[0] for op, a in _instructions(WORKERS / "Dockerfile") if op == "FROM"]
    assert len(set(stages)) == 1, f"stages use different bases: {stages}"
    assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?", stages[0]), stages[0]


def test_gpu_dockerfile_takes_the_cuda_base_as_a_build_argument() -> None:
    ins = _instructions(WORKERS / "Dockerfile.gpu")
    assert ins[0][0] == "ARG"
    assert re.fullmatch(r"CUDA_IMAGE=nvidia/cuda:[\w.-]+-runtime-ubuntu22\.04", ins[0][1])
    stages = [a for op, a in ins if op == "FROM"]
    assert stages == ["${CUDA_IMAGE} AS build", "${CUDA_IMAGE} AS runtime"]


def test_torch_image_puts_a_task_venv_with_cuda_torch_first_on_path() -> None:
    ins = _instructions(WORKERS / "Dockerfile.gpu-torch")
    final = ins[[i for i, (op, _) in enumerate(ins) if op == "FROM"][-1]:]
    env = " ".join(a for op, a in final if op == "ENV")
    assert "PATH=/opt/task-venv/bin:$PATH" in env
    runs = " ".join(a for op, a in ins if op == "RUN")
    assert "/opt/task-venv/bin/pip install \"torch==${TORCH_VERSION}\"" in runs
    assert "https://download.pytorch.org/whl/${TORCH_CUDA}" in runs
    assert "COPY --from=build /opt/task-venv /opt/task-venv" in [f"{op} {a}" for op, a in final]


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_dockerignore_lets_the_copied_sources_through(path: Path) -> None:
    patterns = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    assert "*" in patterns, ".dockerignore should be an allow-list"
    sources = [a.split()[0] for op, a in _instructions(path) if op == "COPY" and "--from" not in a]
    assert sources
    for src in sources:
        assert f"!{src}" in patterns or f"!{src}/" in patterns, f"{src} excluded from context"


# ---- Azure Batch ----------------------------------------------------------------------------


def _json(name: str) -> Doc:
    data: Doc = json.loads((BATCH / name).read_text(encoding="utf-8"))
    return data


def test_batch_pool_uses_the_identity_containers_and_low_priority_nodes() -> None:
    pool = _json("pool.json")
    (identity,) = pool["identity"]["userAssignedIdentities"]
    assert pool["identity"]["type"] == "UserAssigned"
    props = pool["properties"]
    vm = props["deploymentConfiguration"]["virtualMachineConfiguration"]
    containers = vm["containerConfiguration"]
    assert containers["type"] == "DockerCompatible"
    assert {r["identityReference"]["resourceId"] for r in containers["containerRegistries"]} == {
        identity
    }
    assert props["taskSlotsPerNode"] == 1, "one worker per node; it runs tasks concurrently"
    formula = props["scaleSettings"]["autoScale"]["formula"]
    statements = [s.strip() for s in formula.split(";") if s.strip()]
    assigned = dict(s.split("=", 1) for s in statements if "=" in s and "==" not in s)
    assigned = {k.strip(): v.strip() for k, v in assigned.items()}
    assert "$PendingTasks" in formula
    assert "$TargetLowPriorityNodes" in assigned and assigned["$TargetDedicatedNodes"] == "0"
    assert assigned["$NodeDeallocationOption"] == "taskcompletion"


def test_batch_job_and_task_run_the_worker_image_with_dagq_settings() -> None:
    pool, job, task = _json("pool.json"), _json("job.json"), _json("task.json")
    env = {e["name"]: e["value"] for e in job["commonEnvironmentSettings"]}
    assert {"DAGQ_STORE", "DAGQ_WORKER_QUEUE", "DAGQ_WORKER_CONCURRENCY"} <= set(env)
    assert GUID.match(env["AZURE_CLIENT_ID"])
    images = pool["properties"]["deploymentConfiguration"]["virtualMachineConfiguration"][
        "containerConfiguration"
    ]["containerImageNames"]
    settings = task["containerSettings"]
    assert settings["imageName"] in images
    argv = task["commandLine"].split()
    assert argv[argv.index("worker") + 1] == env["DAGQ_WORKER_QUEUE"]
    assert task["userIdentity"]["autoUser"]["elevationLevel"] == "nonadmin"
    stop = re.search(r"--stop-timeout[ =](\d+)", settings["containerRunOptions"])
    assert stop and float(env["DAGQ_KILL_TIMEOUT"]) + 30 <= int(stop[1]), "stop before drain ends"


# ---- checkov ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkov_reports() -> dict[str, Doc]:
    """One checkov run over workers/: Dockerfiles and Kubernetes manifests."""
    exe = Path(sys.executable).with_name("checkov")
    if not exe.exists():
        pytest.fail(f"checkov is not installed next to {sys.executable}: pip install checkov")
    out = subprocess.run(
        [
            str(exe),
            "--skip-download",
            "--framework",
            "dockerfile",
            "kubernetes",
            "-d",
            str(WORKERS),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    try:
        data = json.loads(out.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"checkov printed no JSON (exit {out.returncode}): {out.stderr[-2000:]}")
    reports = data if isinstance(data, list) else [data]
    return {r["check_type"]: r for r in reports if "check_type" in r}


@pytest.mark.parametrize("framework", ["dockerfile", "kubernetes"])
def test_checkov_passes_with_only_justified_skips(
    checkov_reports: dict[str, Doc], framework: str
) -> None:
    assert framework in checkov_reports, f"checkov scanned no {framework} files"
    report = checkov_reports[framework]
    summary, results = report["summary"], report["results"]
    failed = [f"{c['check_id']} {c['file_path']} {c['resource']}" for c in results["failed_checks"]]
    assert not failed, f"checkov {framework} failures:\n" + "\n".join(failed)
    assert summary["parsing_errors"] == 0, f"checkov could not parse: {results}"
    for skip in results["skipped_checks"]:
        reason = (skip["check_result"].get("suppress_comment") or "").strip()
        assert len(reason) >= 20, f"{skip['check_id']} in {skip['file_path']}: skip unjustified"
    if framework == "dockerfile":
        scanned = {c["file_path"].lstrip("/") for c in results["passed_checks"]}
        assert scanned == {"Dockerfile", "Dockerfile.gpu", "Dockerfile.gpu-torch"}
    else:
        resources = {c["resource"] for c in results["passed_checks"]}
        assert {f"Deployment.dagq.{name}" for name in DEPLOYMENTS} <= resources

"""Every AKS manifest validated against schemas: Kubernetes objects against the official
OpenAPI-derived JSON schemas shipped by ``kubernetes-validate`` (strict: unknown fields
fail), KEDA objects against tests/deploy/schemas/keda-v1alpha1.schema.json, and the pod
template of each KEDA ScaledJob against the Kubernetes ``batch/v1`` Job schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
AKS = ROOT / "workers" / "deploy" / "aks"
KUBE_VERSION = "1.31"
KEDA_SCHEMA = json.loads((Path(__file__).parent / "schemas" / "keda-v1alpha1.schema.json")
                         .read_text())
OBJECTS = [(p, d) for p in sorted(AKS.rglob("*.yaml"))
           for d in yaml.safe_load_all(p.read_text()) if d and d.get("kind") != "Kustomization"]


def _id(item: tuple[Path, dict[str, Any]]) -> str:
    path, doc = item
    return f"{path.relative_to(AKS)}:{doc['kind']}/{doc['metadata']['name']}"


@pytest.mark.parametrize("item", OBJECTS, ids=[_id(o) for o in OBJECTS])
def test_manifest_matches_its_schema(item: tuple[Path, dict[str, Any]]) -> None:
    _, doc = item
    if doc["apiVersion"].startswith("keda.sh/"):
        jsonschema.validate(doc, KEDA_SCHEMA)
        if doc["kind"] == "ScaledJob":
            job = {"apiVersion": "batch/v1", "kind": "Job",
                   "metadata": {"name": doc["metadata"]["name"]},
                   "spec": doc["spec"]["jobTargetRef"]}
            kubernetes_validate.validate(job, KUBE_VERSION, strict=True)
        return
    kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def test_the_checks_reject_what_they_should() -> None:
    dep = next(d for _, d in OBJECTS if d["kind"] == "Deployment")
    bad = json.loads(json.dumps(dep))
    bad["spec"]["template"]["spec"]["containers"][0]["livenessprobe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBE_VERSION, strict=True)
    job = next(d for _, d in OBJECTS if d["kind"] == "ScaledJob")
    bad = json.loads(json.dumps(job))
    bad["spec"]["scalingStrategy"]["strategy"] = "fastest"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, KEDA_SCHEMA)


def test_the_long_gpu_scaled_job_runs_one_task_per_job_off_spot() -> None:
    job = next(d for _, d in OBJECTS if d["kind"] == "ScaledJob")
    pod = job["spec"]["jobTargetRef"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert args[:3] == ["gpu-long", "--max-tasks", "1"]
    assert job["spec"]["jobTargetRef"]["backoffLimit"] == 0
    assert all(t["key"] != "kubernetes.azure.com/scalesetpriority" for t in pod["tolerations"])
    trigger = job["spec"]["triggers"][0]["metadata"]
    assert trigger["queueLengthStrategy"] == "visibleonly" and trigger["queueLength"] == "1"

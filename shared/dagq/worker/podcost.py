"""Pod deletion cost: on Kubernetes, a busy worker pod asks to be scaled in last.

When a ReplicaSet shrinks (KEDA lowering a Deployment's replicas), Kubernetes removes the
pods with the lowest ``controller.kubernetes.io/pod-deletion-cost`` annotation first
(https://kubernetes.io/docs/concepts/workloads/controllers/replicaset/#pod-deletion-cost).
The worker keeps its own pod's annotation equal to the number of tasks it runs, so idle
pods go first and a pod running a long GPU task is removed only when no idle one is left.

In a cluster (``KUBERNETES_SERVICE_HOST`` set and a service-account token mounted) the
worker PATCHes its pod (``$POD_NAME``, else ``$HOSTNAME``) through the API server with a
JSON merge patch whenever the count changes. It needs RBAC ``patch`` on ``pods`` in its
namespace. Best effort: a refused patch is logged once and retried on the next change.
``DAGQ_KUBE_API`` and ``DAGQ_KUBE_SA_DIR`` override the API address and the token
directory (tests use a local fake API server).
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

log = logging.getLogger("dagq.worker")

ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TIMEOUT_S = 5.0


class PodCost:
    """Keeps ``ANNOTATION`` of one pod equal to the worker's running-task count."""

    def __init__(self, api: str, namespace: str, pod: str, token_file: Path,
                 ca_file: Path | None) -> None:
        self.url = (f"{api.rstrip('/')}/api/v1/namespaces/{quote(namespace, safe='')}"
                    f"/pods/{quote(pod, safe='')}")
        self.token_file = token_file
        self.context = (ssl.create_default_context(cafile=str(ca_file))
                        if ca_file is not None and ca_file.exists() else None)
        self._last: int | None = None
        self._warned = False

    def update(self, running: int) -> bool:
        """Set the cost to ``running`` if it changed; False if the API refused."""
        if running == self._last:
            return True
        body = json.dumps({"metadata": {"annotations": {ANNOTATION: str(running)}}}).encode()
        try:
            token = self.token_file.read_text().strip()  # rotated by the kubelet: reread
            req = urllib.request.Request(self.url, data=body, method="PATCH", headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/merge-patch+json"})
            with urllib.request.urlopen(req, timeout=TIMEOUT_S, context=self.context):
                pass
        except (OSError, ValueError) as exc:
            if not self._warned:
                log.warning("could not set %s on this pod (scale-in may pick a busy pod): %s",
                            ANNOTATION, exc)
                self._warned = True
            return False
        self._last = running
        return True


def from_env(env: Mapping[str, str] | None = None) -> PodCost | None:
    """A ``PodCost`` for this pod when running in a cluster, else None."""
    env = os.environ if env is None else env
    sa = Path(env.get("DAGQ_KUBE_SA_DIR") or SA_DIR)
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
    api = env.get("DAGQ_KUBE_API") or (f"https://{host}:{port}" if host else "")
    pod = env.get("POD_NAME") or env.get("HOSTNAME")
    if not api or not pod or not (sa / "token").exists():
        return None
    try:
        namespace = (sa / "namespace").read_text().strip()
    except OSError:
        return None
    return PodCost(api, namespace, pod, sa / "token", sa / "ca.crt")

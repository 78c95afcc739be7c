"""Pod deletion cost against a fake Kubernetes API server on a loopback socket: the
running worker's pod carries its running-task count, so scale-in takes idle pods first;
an API that refuses is survived. ``--max-tasks 1`` (one Job per message) exits after one."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from dagq.worker.podcost import ANNOTATION, from_env
from tests.worker.stack import Stack


class FakeApi:
    """Records PATCHes of pods; answers 403 while ``refuse`` is set."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, str | None, str | None, dict[str, Any]]] = []
        self.refuse = False
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_PATCH(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.patches.append((self.path, self.headers.get("Authorization"),
                                     self.headers.get("Content-Type"), body))
                self.send_response(403 if fake.refuse else 200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def costs(self) -> list[str]:
        return [b["metadata"]["annotations"][ANNOTATION] for *_, b in self.patches]


@pytest.fixture
def api() -> Iterator[FakeApi]:
    a = FakeApi()
    yield a
    a.server.shutdown()


def _service_account(root: Path) -> Path:
    sa = root / "sa"
    sa.mkdir()
    (sa / "token").write_text("tok-123\n")
    (sa / "namespace").write_text("dagq\n")
    return sa


def test_outside_a_cluster_nothing_is_patched(tmp_path: Path) -> None:
    assert from_env({"HOSTNAME": "x"}) is None
    sa = _service_account(tmp_path)
    assert from_env({"DAGQ_KUBE_SA_DIR": str(sa), "HOSTNAME": "x"}) is None  # no API
    cost = from_env({"DAGQ_KUBE_SA_DIR": str(sa), "KUBERNETES_SERVICE_HOST": "10.0.0.1",
                     "HOSTNAME": "pod-1"})
    assert cost is not None and cost.url == "https://10.0.0.1:443/api/v1/namespaces/dagq/pods/pod-1"


def test_a_refusing_api_is_survived_and_retried(tmp_path: Path, api: FakeApi) -> None:
    cost = from_env({"DAGQ_KUBE_SA_DIR": str(_service_account(tmp_path)),
                     "DAGQ_KUBE_API": api.url, "POD_NAME": "w-1"})
    assert cost is not None
    api.refuse = True
    assert cost.update(1) is False
    api.refuse = False
    assert cost.update(1) is True and cost.update(1) is True  # unchanged: not sent again
    assert api.costs() == ["1", "1"]
    path, auth, ctype, _ = api.patches[-1]
    assert (path, auth, ctype) == ("/api/v1/namespaces/dagq/pods/w-1", "Bearer tok-123",
                                   "application/merge-patch+json")


@pytest.mark.slow
def test_a_busy_worker_marks_its_pod_and_a_job_worker_takes_one_task(
        sqlite_stack: Stack, api: FakeApi) -> None:
    stack = sqlite_stack
    env = {"DAGQ_KUBE_SA_DIR": str(_service_account(stack.root)), "DAGQ_KUBE_API": api.url,
           "POD_NAME": "dagq-worker-gpu-abc"}
    stack.coordinator()
    wf = stack.submit("busy", [{"name": f"t{i}", "kwargs": {"cmd": "sleep 2"}}
                               for i in range(2)], default_queue="gpu")
    w = stack.worker("gpu", "--max-tasks", "1", env=env)
    assert w.wait(60) == 0, w.text()  # exited by itself after one task
    assert "succeeded=1" in w.text(), w.text()
    costs = api.costs()
    assert "1" in costs, costs  # marked busy while running (no annotation reads as 0)
    assert api.patches[0][0] == "/api/v1/namespaces/dagq/pods/dagq-worker-gpu-abc"
    statuses = sorted(t["status"] for t in stack.tasks(wf).values())
    assert statuses[0] == "completed" and statuses[1] != "completed", statuses

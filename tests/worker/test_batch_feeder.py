"""`dagq batch-feed` against a local HTTP server speaking the two Batch calls it uses.

No Batch account is reachable here; the server checks what a Batch account would: the
bearer token, the api-version, the filter, and the task bodies added.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

import pytest

from dagq.config import Settings
from dagq.wiring import backend_from_settings
from dagq.worker.batch_feeder import API_VERSION, tasks_to_add

DAGQ = str(Path(sys.executable).parent / "dagq")
TASK_FILE = Path(__file__).resolve().parents[2] / "workers" / "deploy" / "batch" / "task.json"


class FakeBatch(BaseHTTPRequestHandler):
    """Job ``dagq-gpu`` with ``active`` unfinished tasks (served over two pages)."""

    active: ClassVar[int] = 0
    added: ClassVar[list[dict[str, Any]]] = []
    errors: ClassVar[list[str]] = []
    reject: ClassVar[int] = 0
    """Tasks of each add-task-collection call to refuse (Batch still answers 200)."""

    def _check(self) -> dict[str, list[str]]:
        query = parse_qs(urlparse(self.path).query)
        if self.headers.get("Authorization") != "Bearer t0ken":
            self.errors.append(f"bad auth {self.headers.get('Authorization')}")
        if "page" not in query and query.get("api-version") != [API_VERSION]:
            self.errors.append(f"bad api-version {query.get('api-version')}")
        return query

    def do_GET(self) -> None:
        query = self._check()
        assert urlparse(self.path).path == "/jobs/dagq-gpu/tasks"
        if "page" in query:
            body: dict[str, Any] = {"value": [{"id": f"w{i}"} for i in range(1, self.active)]}
        else:
            if query.get("$filter") != ["state ne 'completed'"]:
                self.errors.append(f"bad filter {query.get('$filter')}")
            body = {"value": [{"id": "w0"}] if self.active else []}
            if self.active > 1:
                host = self.headers["Host"]
                body["odata.nextLink"] = f"http://{host}/jobs/dagq-gpu/tasks?page=2"
        self._reply(200, body)

    def do_POST(self) -> None:
        self._check()
        assert urlparse(self.path).path == "/jobs/dagq-gpu/addtaskcollection"
        tasks = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["value"]
        refused, accepted = tasks[:self.reject], tasks[self.reject:]
        FakeBatch.added += accepted
        error = {"code": "TaskExists", "message": {"lang": "en-US", "value": "exists"}}
        self._reply(200, {"value": [
            *({"status": "clientError", "taskId": t["id"], "error": error} for t in refused),
            *({"status": "success", "taskId": t["id"]} for t in accepted)]})

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def batch() -> Iterator[str]:
    FakeBatch.active, FakeBatch.added, FakeBatch.errors, FakeBatch.reject = 0, [], [], 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeBatch)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_tasks_to_add() -> None:
    assert tasks_to_add(backlog=0, active=0, concurrency=1, max_tasks=20) == 0
    assert tasks_to_add(backlog=7, active=0, concurrency=2, max_tasks=20) == 4
    assert tasks_to_add(backlog=7, active=3, concurrency=2, max_tasks=20) == 1
    assert tasks_to_add(backlog=7, active=9, concurrency=2, max_tasks=20) == 0
    assert tasks_to_add(backlog=500, active=2, concurrency=1, max_tasks=20) == 18


def test_the_feeder_tops_the_job_up_to_the_queue_backlog(tmp_path: Path, batch: str) -> None:
    env = dict(os.environ, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}", DAGQ_BATCH_TOKEN="t0ken")
    q = backend_from_settings(Settings.from_env(env)).queues.get("gpu")
    q.send_many([(b"{}", 0.0, f"m{i}") for i in range(7)])
    FakeBatch.active = 2

    def feed() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [DAGQ, "batch-feed", "gpu", "--batch-url", batch, "--job", "dagq-gpu",
             "--task-file", str(TASK_FILE), "--concurrency", "2", "--max-tasks", "5", "--once"],
            env=env, capture_output=True, text=True, timeout=60)

    out = feed()
    assert out.returncode == 0, out.stderr
    assert "7 waiting, 2 worker tasks active, added 2" in out.stderr  # ceil(7/2)=4, 2 running
    assert FakeBatch.errors == []
    assert len(FakeBatch.added) == 2
    template = json.loads(TASK_FILE.read_text())
    for task in FakeBatch.added:
        assert task["id"].startswith("worker-") and task["id"] != template["id"]
        assert {k: v for k, v in task.items() if k != "id"} == \
            {k: v for k, v in template.items() if k != "id"}
    assert len({t["id"] for t in FakeBatch.added}) == 2

    FakeBatch.active = 4  # the job now has what the backlog needs: nothing more is added
    out = feed()
    assert out.returncode == 0 and "added 0" in out.stderr
    assert len(FakeBatch.added) == 2


def test_an_unreachable_batch_account_is_a_clear_error(tmp_path: Path) -> None:
    env = dict(os.environ, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}", DAGQ_BATCH_TOKEN="t")
    out = subprocess.run(
        [DAGQ, "batch-feed", "gpu", "--batch-url", "http://127.0.0.1:1", "--job", "j",
         "--task-file", str(TASK_FILE), "--once"],
        env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "cannot reach the Batch account http://127.0.0.1:1" in out.stderr
    assert "Traceback" not in out.stderr


def _feed(tmp_path: Path, batch: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}", DAGQ_BATCH_TOKEN="t0ken")
    q = backend_from_settings(Settings.from_env(env)).queues.get("gpu")
    if not q.approximate_count():
        q.send_many([(b"{}", 0.0, f"m{i}") for i in range(3)])
    return subprocess.run(
        [DAGQ, "batch-feed", "gpu", "--batch-url", batch, "--job", "dagq-gpu",
         "--task-file", str(TASK_FILE), *extra],
        env=env, capture_output=True, text=True, timeout=60)


def test_tasks_batch_rejects_are_not_counted_as_added(tmp_path: Path, batch: str) -> None:
    FakeBatch.reject = 1
    out = _feed(tmp_path, batch, "--once")
    assert out.returncode == 0, out.stderr
    assert "3 waiting, 0 worker tasks active, added 2" in out.stderr
    assert "TaskExists: exists" in out.stderr
    FakeBatch.reject = 100
    out = _feed(tmp_path, batch, "--once")
    assert out.returncode == 1
    assert "Batch accepted none of the 3 worker task(s)" in out.stderr
    assert "Traceback" not in out.stderr


def test_task_ids_do_not_repeat_across_rounds_in_one_second(tmp_path: Path, batch: str) -> None:
    for _ in range(3):  # the same second, the same indexes: ids must still differ
        assert _feed(tmp_path, batch, "--once").returncode == 0
    ids = [t["id"] for t in FakeBatch.added]
    assert len(ids) == 9 and len(set(ids)) == 9
    assert all(len(i) <= 64 and i.replace("-", "").isalnum() for i in ids)


def test_a_long_running_feeder_survives_a_failed_round(tmp_path: Path) -> None:
    env = dict(os.environ, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}", DAGQ_BATCH_TOKEN="t")
    proc = subprocess.Popen(
        [DAGQ, "batch-feed", "gpu", "--batch-url", "http://127.0.0.1:1", "--job", "j",
         "--task-file", str(TASK_FILE), "--interval", "0.2"],
        env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        lines = [proc.stderr.readline() for _ in range(2)]
        assert all("this round failed, retrying" in line for line in lines), lines
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=30)

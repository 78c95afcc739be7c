"""Workflow hooks on real stores (embedded SQLite and Azurite): a webhook POSTed to a real
HTTP server on loopback with a valid signature, retried with back-off after 500s and then
delivered once, an exit handler run on failure only, and one ``events`` queue message per
terminal event (docs/notifications.md)."""

from __future__ import annotations

import json
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dagq.client import WorkflowClient
from dagq.config import Settings
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES, TaskDef, WorkflowDef
from dagq.errors import WorkflowNotFound
from dagq.ports import Backend
from dagq.protocol import events
from dagq.runtime.coordinator import Coordinator
from dagq.runtime.notify import handler_id
from dagq.worker.runtime import Worker
from tests.fixtures.webhook import Hook
from tests.runtime.running import run_threads_until

SECRET = "s3cret-for-tests"
FAST = Settings(sweep_interval=0.5, outbox_grace=1.0, outbox_flush=0.2, idle_poll=0.05,
                heartbeat_interval=1.0)


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGQ_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("DAGQ_WEBHOOK_BACKOFF", "0.4")
    monkeypatch.setenv("DAGQ_WEBHOOK_TIMEOUT", "5")
    import dagq.metrics  # metrics off, as in the other runtime tests
    if isinstance(getattr(dagq.metrics, "sink", None), types.ModuleType):
        monkeypatch.setattr(dagq.metrics, "sink", None)


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.close()


FAIL = "echo error: boom >&2; exit 3"


def wf(name: str, ok: bool, **hooks: Any) -> WorkflowDef:
    return WorkflowDef(name, (TaskDef("a", {"cmd": "true"}),
                              TaskDef("b", {"cmd": "true" if ok else FAIL}, depends_on=("a",))),
                       **hooks)


def run_until(client: WorkflowClient, coord: Coordinator, workers: list[Worker],
              done: Any, deadline_s: float = 60.0) -> None:
    run_threads_until(coord, workers, done, lambda: "timed out", deadline_s)


def ended(client: WorkflowClient, *ids: str) -> bool:
    return all(client.row(i).status in TERMINAL_WORKFLOW_STATUSES for i in ids)


def record(backend: Backend, delivery: str) -> dict[str, Any]:
    return backend.records.get(events.RECORDS, events.record_key(delivery))[0]


def test_a_webhook_is_delivered_once_with_a_valid_signature(
        backend: Backend, tmp_path: Path, hook: Hook) -> None:
    client = WorkflowClient(backend)
    run_id = client.submit(wf("fails", False, on_finish={"webhook": {"url": hook.url}})).id
    coord = Coordinator(backend, FAST, children=client)
    worker = Worker(backend, FAST, "default", concurrency=2, log_dir=tmp_path / "logs")
    run_until(client, coord, [worker], lambda: ended(client, run_id) and hook.calls)
    time.sleep(1.0)  # nothing more comes
    assert len(hook.calls) == 1
    _, headers, body = hook.calls[0]
    assert events.verify(SECRET.encode(), headers[events.TIMESTAMP_HEADER], body,
                         headers[events.SIGNATURE_HEADER], time.time())
    assert not events.verify(b"wrong", headers[events.TIMESTAMP_HEADER], body,
                             headers[events.SIGNATURE_HEADER], time.time())
    doc = json.loads(body)
    assert doc["id"] == headers[events.EVENT_ID_HEADER] == f"{run_id}/event-1"
    assert doc["type"] == headers[events.EVENT_TYPE_HEADER] == "dagq.workflow.failed"
    assert doc["specversion"] == "1.0" and doc["subject"] == f"workflows/{run_id}"
    data = doc["data"]
    assert data["workflow_id"] == run_id and data["name"] == "fails"
    assert data["status"] == "failed" and data["counts"] == {"completed": 1, "failed": 1}
    assert data["failed_tasks"] == [{"task": "b", "attempt": 1, "error": "error: boom"}]
    assert data["finished_at"] >= data["created_at"]
    assert record(backend, f"{run_id}/event-1~on_finish")["state"] == "delivered"


def test_a_failing_endpoint_is_retried_with_backoff_then_delivered_once(
        backend: Backend, tmp_path: Path) -> None:
    hook = Hook([500, 500])
    try:
        client = WorkflowClient(backend)
        run_id = client.submit(wf("ok", True, on_finish={"webhook": {"url": hook.url}})).id
        coord = Coordinator(backend, FAST, children=client)
        worker = Worker(backend, FAST, "default", concurrency=2, log_dir=tmp_path / "logs")
        run_until(client, coord, [worker],
                  lambda: ended(client, run_id) and len(hook.calls) >= 3)
        time.sleep(1.5)
    finally:
        hook.close()
    assert len(hook.calls) == 3
    times = [t for t, _, _ in hook.calls]
    assert times[1] - times[0] >= 0.4 and times[2] - times[1] >= 0.8  # doubling back-off
    assert [h[events.ATTEMPT_HEADER] for _, h, _ in hook.calls] == ["1", "2", "3"]
    assert len({b for _, _, b in hook.calls}) == 1  # the same event each time
    assert json.loads(hook.calls[2][2])["type"] == "dagq.workflow.completed"
    rec = record(backend, f"{run_id}/event-1~on_finish")
    assert rec["state"] == "delivered" and rec["tries"] == 3


def test_the_exit_handler_runs_on_failure_and_not_on_success(
        backend: Backend, tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    handler = {"task": {"name": "page", "kwargs": {"cmd": f"cp \"$DAGQ_INPUTS_FILE\" {seen}"}}}
    client = WorkflowClient(backend)
    bad = client.submit(wf("bad", False, on_failure=handler)).id
    good = client.submit(wf("good", True, on_failure=handler)).id
    bad_handler = handler_id(bad, "on_failure", 1)
    coord = Coordinator(backend, FAST, children=client)
    worker = Worker(backend, FAST, "default", concurrency=2, log_dir=tmp_path / "logs")

    def handled() -> bool:
        try:
            return ended(client, bad, good, bad_handler)
        except WorkflowNotFound:
            return False

    run_until(client, coord, [worker], handled)
    assert client.row(bad).status == "failed"  # the handler does not change the status
    assert client.row(good).status == "completed"
    assert client.row(bad_handler).status == "completed"
    with pytest.raises(WorkflowNotFound):
        client.row(handler_id(good, "on_failure", 1))
    inputs = json.loads(seen.read_text())
    summary = inputs["workflow"]
    assert summary["workflow_id"] == bad and summary["status"] == "failed"
    assert summary["failed_tasks"] == [{"task": "b", "attempt": 1, "error": "error: boom"}]
    assert summary["handlers"] == {"on_failure": bad_handler}


def test_the_events_queue_gets_one_message_per_terminal_event(
        backend: Backend, tmp_path: Path) -> None:
    client = WorkflowClient(backend)
    both = {"on_finish": {"event": True}, "on_failure": {"event": True}}
    bad = client.submit(wf("bad", False, **both)).id
    good = client.submit(wf("good", True, on_finish={"event": True})).id
    quiet = client.submit(wf("quiet", True, on_failure={"event": True})).id
    coord = Coordinator(backend, FAST, children=client)
    worker = Worker(backend, FAST, "default", concurrency=4, log_dir=tmp_path / "logs")
    queue = backend.queues.get("events")
    got: list[dict[str, Any]] = []

    def received() -> bool:
        for msg in queue.receive(10, 30):
            got.append(json.loads(msg.body))
            queue.delete(msg)
        return ended(client, bad, good, quiet) and len(got) >= 2

    run_until(client, coord, [worker], received)
    time.sleep(1.0)
    received()
    assert sorted((m["data"]["workflow_id"], m["type"]) for m in got) == sorted(
        [(bad, "dagq.workflow.failed"), (good, "dagq.workflow.completed")])
    assert {m["id"] for m in got} == {f"{bad}/event-1", f"{good}/event-1"}
    assert "events" not in backend.queues.names()  # never taken for a task queue

"""Workflow hooks under coordinator crashes: SIGKILL ``dagq coordinator`` after it queued
an event's deliveries but before its outbox entry was cleared (the restarted coordinator
sends the entry again), or after the delivery loop claimed a delivery but before its POST
(the lease runs out and the new process makes it). Either way the webhook is POSTed once
and the ``events`` queue gets one message (docs/notifications.md, "Delivery guarantees")."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dagq.backends import open_backend
from tests.e2e.harness import Dagq, eventually
from tests.fixtures.webhook import Hook

pytestmark = pytest.mark.slow

SECRET = "crash-test-secret"
HOOK_ENV = {"DAGQ_WEBHOOK_SECRET": SECRET, "DAGQ_WEBHOOK_TIMEOUT": "1",
            "DAGQ_WEBHOOK_BACKOFF": "0.3"}
STORES = [pytest.param("sqlite", id="sqlite"),
          pytest.param("azurite", id="azurite", marks=pytest.mark.azurite)]


@pytest.fixture(params=STORES)
def store_env(request: pytest.FixtureRequest) -> dict[str, str]:
    if request.param == "sqlite":
        return {}
    store, connection = request.getfixturevalue("azurite_store")
    return {"DAGQ_STORE": store, "DAGQ_STORAGE_CONNECTION_STRING": connection}


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.close()


def events_messages(d: Dagq) -> list[dict[str, Any]]:
    backend = open_backend(d.store, connection_string=d.base_env.get(
        "DAGQ_STORAGE_CONNECTION_STRING"))
    try:
        queue = backend.queues.get("events")
        out = []
        while msgs := queue.receive(32, 60):
            out += [json.loads(m.body) for m in msgs]
        return out
    finally:
        backend.close()


@pytest.mark.parametrize("point", ["notify_after_queue", "notify_after_claim"])
def test_a_webhook_is_delivered_once_across_a_coordinator_crash(
        tmp_path: Path, store_env: dict[str, str], hook: Hook, point: str) -> None:
    d = Dagq(tmp_path, base_env={**HOOK_ENV, **store_env})
    try:
        path = d.define("hooked", [{"name": "a", "kwargs": {"cmd": "true"}}],
                        on_finish={"webhook": {"url": hook.url}, "event": True})
        run_id = d.submit(path)
        d.worker()
        doomed = d.coordinator(env={"DAGQ_CRASH_AT": point})
        assert doomed.wait(60) == -9, doomed.text()  # killed at the point
        assert not hook.calls
        d.coordinator()
        assert d.wait_terminal(run_id)["status"] == "completed"
        eventually(lambda: hook.calls or None, "the webhook", 30.0, 0.1)
        time.sleep(7.0)  # past the outbox grace and the lease: any duplicate would come
        assert len(hook.calls) == 1, [h for _, h, _ in hook.calls]
        body = json.loads(hook.calls[0][2])
        assert body["id"] == f"{run_id}/event-1"
        got = events_messages(d)
        assert [m["id"] for m in got] == [f"{run_id}/event-1"]
    finally:
        d.close()

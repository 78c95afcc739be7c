"""On the Function App no ``dagq coordinator`` process runs the webhook loop: the repair
timer makes the deliveries waiting in the ``notifications`` queue."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from azure.functions.timer import TimerRequest

from dagq.client import WorkflowClient
from dagq.core.model import TaskDef, WorkflowDef
from dagq.functions.coordinator_queue import storage_queue_blueprint
from dagq.functions.runtime import Runtime
from dagq.functions.timers import timers_blueprint
from dagq.protocol.messages import CompletionMessage
from dagq.protocol.names import COMPLETIONS
from tests.fixtures.webhook import Hook
from tests.functions.host import app_of, deliver_storage_queue, user_functions


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.close()


def test_the_repair_timer_delivers_waiting_webhooks(app_env: dict[str, str], hook: Hook,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGQ_WEBHOOK_SECRET", "s")
    rt = Runtime({**app_env, "DAGQ_WEBHOOK_SECRET": "s"})
    try:
        backend = rt.backend()
        fns = user_functions(app_of(timers_blueprint(rt, "*/30 * * * * *"),
                                    storage_queue_blueprint(rt)))
        client = WorkflowClient(backend)
        defn = WorkflowDef("hooked", (TaskDef("a", {"cmd": "true"}),),
                           on_finish={"webhook": {"url": hook.url}})
        wf = client.submit(defn, workflow_id="hooked-1").id
        deliver_storage_queue(fns["coordinator_queue"], backend)  # start: a dispatched
        backend.queues.get(COMPLETIONS).send(CompletionMessage(wf, "a", 1, True).encode())
        deliver_storage_queue(fns["coordinator_queue"], backend)  # completed: event queued
        assert client.summary(wf)["status"] == "completed"
        assert hook.calls == []  # nothing delivers it until the timer runs
        fns["repair_sweep"](TimerRequest(past_due=False))
        assert len(hook.calls) == 1
        assert json.loads(hook.calls[0][2])["data"]["workflow_id"] == wf
        fns["repair_sweep"](TimerRequest(past_due=False))
        assert len(hook.calls) == 1  # delivered once
    finally:
        rt.close()

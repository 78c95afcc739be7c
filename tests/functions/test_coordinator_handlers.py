"""The coordinator triggers and the repair timer, fed the runtime's own message classes."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from azure.functions.queue import QueueMessage
from azure.functions.timer import TimerRequest

from dagq.client import WorkflowClient
from dagq.core.parse import load_definition
from dagq.errors import PreconditionFailed
from dagq.functions.completions import RedeliverLater
from dagq.functions.coordinator_queue import storage_queue_blueprint
from dagq.functions.coordinator_sb import servicebus_blueprint
from dagq.functions.runtime import Runtime
from dagq.functions.timers import timers_blueprint
from dagq.ports import Backend, StateStore
from dagq.protocol.messages import CompletionMessage, decode_task
from dagq.protocol.names import COMPLETIONS
from tests.functions.host import (
    Handler,
    app_of,
    deliver_servicebus,
    deliver_storage_queue,
    sb_message,
    user_functions,
)

CHAIN = """\
name: chain
tasks:
  - {name: a, kwargs: {cmd: "true"}}
  - {name: b, kwargs: {cmd: "true"}, depends_on: [a]}
  - {name: c, kwargs: {cmd: "true"}, depends_on: [b]}
"""


def submit(backend: Backend, workflow_id: str = "w") -> str:
    """Submit CHAIN directly with the client (the HTTP path is tested elsewhere)."""
    return WorkflowClient(backend).submit(load_definition(CHAIN), workflow_id=workflow_id).id


def take_task(backend: Backend, queue: str = "default") -> tuple[str, str, int]:
    """Receive and acknowledge one task message like a worker; (workflow, task, attempt)."""
    [msg] = backend.queues.get(queue).receive(1, 30.0)
    backend.queues.get(queue).delete(msg)
    task = decode_task(msg.body)
    return task.workflow_id, task.task, task.attempt


def complete(backend: Backend, wf: str, task: str, attempt: int, output: object = None) -> None:
    """Send the completion a worker would send."""
    body = CompletionMessage(wf, task, attempt, success=True, output=output,
                             worker="test:1", duration_s=0.01).encode()
    backend.queues.get(COMPLETIONS).send(body, session_id=wf)


@pytest.mark.parametrize("trigger", ["coordinator_queue", "coordinator_servicebus"])
def test_trigger_applies_real_completions(fns: dict[str, Handler], backend: Backend,
                                          trigger: str) -> None:
    deliver = deliver_storage_queue if trigger == "coordinator_queue" else deliver_servicebus
    wf = submit(backend)
    assert deliver(fns[trigger], backend) == 1
    for expected in ("a", "b", "c"):
        got = take_task(backend)
        assert got == (wf, expected, 1)
        complete(backend, wf, expected, 1, output={"task": expected})
        complete(backend, wf, expected, 1, output={"task": expected})  # a duplicate delivery
        assert deliver(fns[trigger], backend) == 2
    client = WorkflowClient(backend)
    assert client.summary(wf)["status"] == "completed"
    assert client.output(wf, "c") == {"task": "c"}
    # every invocation cleared what it sent: no dispatch is left for a sweep to re-send
    assert client.state(wf).outbox == {}
    assert backend.queues.get("default").approximate_count() == 0


def test_servicebus_batch_is_one_write(fns: dict[str, Handler], backend: Backend) -> None:
    wf = submit(backend)
    deliver_servicebus(fns["coordinator_servicebus"], backend)
    take_task(backend)
    bodies = [CompletionMessage(wf, "a", 1, success=True).encode()] * 3
    counting = _CountingStates(backend.states)
    backend.states = counting  # type: ignore[assignment]
    try:
        fns["coordinator_servicebus"]([sb_message(b, f"m{i}") for i, b in enumerate(bodies)])
    finally:
        backend.states = counting.inner
    # one write applies the whole session batch, one more clears the sent dispatch
    assert counting.writes == 2
    assert take_task(backend) == (wf, "b", 1)


POISON = [
    b"not json at all",
    b'{"v": 1, "type": "completion", "workflow_id": "w", "task": "a"}',
    b'{"v": 99, "type": "completion"}',
    json.dumps({"v": 1, "type": "control", "workflow_id": "w", "action": "explode",
                "request_id": "r"}).encode(),
]


@pytest.mark.parametrize("body", POISON, ids=["not-json", "no-attempt", "version", "action"])
def test_poison_on_storage_queue_is_dead_lettered_and_acknowledged(
        fns: dict[str, Handler], backend: Backend, body: bytes,
        caplog: pytest.LogCaptureFixture) -> None:
    wf = submit(backend)
    queue = backend.queues.get(COMPLETIONS)
    queue.send(body)
    deliver_storage_queue(fns["coordinator_queue"], backend)  # start + poison, no raise
    assert queue.approximate_count() == 0
    [(dead, reason)] = queue.dead_letters()
    assert dead.body == body and reason
    assert any("poison" in r.getMessage() and reason in r.getMessage() for r in caplog.records)
    assert WorkflowClient(backend).summary(wf)["status"] == "running"  # the rest applied


def test_poison_on_servicebus_is_logged_and_completed(
        fns: dict[str, Handler], backend: Backend, caplog: pytest.LogCaptureFixture) -> None:
    wf = submit(backend)
    [start] = backend.queues.get(COMPLETIONS).receive(1, 30.0)
    batch = [sb_message(b, f"poison-{i}", delivery_count=1) for i, b in enumerate(POISON)]
    fns["coordinator_servicebus"]([sb_message(start.body, start.id), *batch])  # no raise
    logged = " ".join(r.getMessage() for r in caplog.records)
    for i in range(len(POISON)):
        assert f"poison-{i}" in logged
    assert WorkflowClient(backend).summary(wf)["status"] == "running"


def test_queue_message_without_receipt_is_still_acknowledged(
        fns: dict[str, Handler], backend: Backend) -> None:
    message = QueueMessage(id="x", body=b"garbage", dequeue_count=1)  # type: ignore[no-untyped-call]
    fns["coordinator_queue"](message)
    assert backend.queues.get(COMPLETIONS).dead_letters() == []


class _CountingStates:
    """Counts conditional state writes (and otherwise passes every call through)."""

    def __init__(self, inner: StateStore) -> None:
        self.inner = inner
        self.writes = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def replace(self, workflow_id: str, data: bytes, etag: str) -> str:
        self.writes += 1
        return self.inner.replace(workflow_id, data, etag)

    def append(self, workflow_id: str, data: bytes, etag: str) -> str:
        self.writes += 1
        return self.inner.append(workflow_id, data, etag)


class _LosingStates:
    """Injected fault: every conditional state write loses the race."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def replace(self, workflow_id: str, data: bytes, etag: str) -> str:
        raise PreconditionFailed(f"injected conflict on {workflow_id}")

    append = replace


@pytest.fixture
def losing(runtime: Runtime, backend: Backend) -> Iterator[Backend]:
    real = backend.states
    backend.states = _LosingStates(real)  # type: ignore[assignment]
    yield backend
    backend.states = real


def test_lost_write_races_ask_for_redelivery(fns: dict[str, Handler], losing: Backend) -> None:
    wf = submit(losing)
    with pytest.raises(RedeliverLater, match=wf):
        deliver_storage_queue(fns["coordinator_queue"], losing)
    # the host abandoned it: the start request is still queued for the next delivery
    assert losing.queues.get(COMPLETIONS).approximate_count() == 1


def test_timer_sweep_applies_cancel_and_restarts_stale_work(app_env: dict[str, str]) -> None:
    rt = Runtime({**app_env, "DAGQ_STALE_PENDING": "0", "DAGQ_OUTBOX_GRACE": "0"})
    try:
        backend = rt.backend()
        fns = user_functions(app_of(timers_blueprint(rt, "*/30 * * * * *"),
                                    storage_queue_blueprint(rt), servicebus_blueprint(rt)))
        client = WorkflowClient(backend)
        stale = submit(backend, "stale")
        cancelled = submit(backend, "doomed")
        queue = backend.queues.get(COMPLETIONS)
        for m in queue.receive(10, 30.0):  # the start requests are lost
            queue.delete(m)
        backend.index.request_cancel(cancelled)  # a cancel whose message was lost too
        fns["repair_sweep"](TimerRequest(past_due=True))
        assert client.summary(cancelled)["status"] == "cancelled"
        assert client.summary(stale)["status"] == "running"
        assert take_task(backend) == (stale, "a", 1)
    finally:
        rt.close()


@pytest.mark.azurite
def test_storage_trigger_reads_the_wire_format_like_the_host(
        azurite_store: tuple[str, str]) -> None:
    """Receive with a plain queue client, base64-decode as the host does by default
    (host.json messageEncoding), hand over, and delete with the pop receipt."""
    from azure.storage.queue import QueueClient

    store, connection = azurite_store
    queue_name = store.rsplit("/", 1)[1] + "-completions"
    rt = Runtime({"DAGQ_STORE": store, "DAGQ_STORAGE_CONNECTION_STRING": connection})
    try:
        backend = rt.backend()
        handler = user_functions(app_of(storage_queue_blueprint(rt)))["coordinator_queue"]
        raw = QueueClient.from_connection_string(connection, queue_name)

        def host_delivers_one() -> bytes:
            [msg] = list(raw.receive_messages(max_messages=1, visibility_timeout=30))
            body = base64.b64decode(msg.content)
            handler(QueueMessage(  # type: ignore[no-untyped-call]
                id=msg.id, body=body, dequeue_count=msg.dequeue_count,
                pop_receipt=msg.pop_receipt))
            raw.delete_message(msg.id, msg.pop_receipt)
            return body

        wf = submit(backend)
        assert json.loads(host_delivers_one())["action"] == "start"
        assert take_task(backend) == (wf, "a", 1)
        complete(backend, wf, "a", 1)
        assert json.loads(host_delivers_one())["type"] == "completion"
        assert take_task(backend) == (wf, "b", 1)
    finally:
        rt.close()


def test_each_thread_has_its_own_coordinator(runtime: Runtime) -> None:
    mine = runtime.coordinator()
    assert runtime.coordinator() is mine
    with ThreadPoolExecutor(1) as pool:
        theirs = pool.submit(runtime.coordinator).result()
    assert theirs is not mine and theirs.backend is mine.backend

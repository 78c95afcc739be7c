"""The coordinator rides out a store outage (it backs off, never exits, and resumes by
itself), and a task message that would not fit its queue is stored apart, not refused."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from dagq.client import WorkflowClient
from dagq.config import Settings
from dagq.core.parse import load_definition
from dagq.errors import StoreUnavailable
from dagq.outage import Outage
from dagq.ports import Backend, Message, Queue
from dagq.protocol.messages import decode_task
from dagq.protocol.outputs import expand
from dagq.runtime.coordinator import Coordinator

ONE = "name: one\ntasks:\n  - {name: t, kwargs: {cmd: 'true'}}\n"


class _Flaky:
    """Injected fault: a queue whose every call fails while ``down`` is set."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        self.down = threading.Event()
        self.failures = 0

    def __getattr__(self, name: str) -> Any:
        real = getattr(self.queue, name)
        if not callable(real):
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down.is_set():
                self.failures += 1
                raise StoreUnavailable("injected outage: connection refused")
            return real(*args, **kwargs)
        return call


def test_the_coordinator_backs_off_during_an_outage_and_resumes(
        backend: Backend, caplog: pytest.LogCaptureFixture) -> None:
    client = WorkflowClient(backend)
    coord = Coordinator(backend, Settings(idle_poll=0.05), children=client)
    flaky = _Flaky(coord.completions)
    coord.completions = flaky
    flaky.down.set()
    wf = client.submit(load_definition(ONE)).id
    stop = threading.Event()
    thread = threading.Thread(target=coord.run, args=(stop,), daemon=True)
    with caplog.at_level(logging.WARNING, "dagq.coordinator"):
        thread.start()
        deadline = time.monotonic() + 30
        while flaky.failures < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert thread.is_alive() and flaky.failures >= 3
        flaky.down.clear()  # the service is back
        while client.row(wf).status != "running" and time.monotonic() < deadline + 30:
            time.sleep(0.05)
        stop.set()
        thread.join(timeout=30)
    assert client.row(wf).status == "running"  # the start was applied after the outage
    unavailable = [r for r in caplog.records if "store is unavailable" in r.getMessage()]
    back = [r for r in caplog.records if "available again" in r.getMessage()]
    assert len(unavailable) == 1 and len(back) == 1  # one line per change, not per retry


def test_back_off_doubles_up_to_its_ceiling() -> None:
    outage = Outage("x", logging.getLogger("test"), first=0.5, ceiling=4.0)
    waits = [outage.failed(StoreUnavailable("down")) for _ in range(6)]
    assert waits == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    outage.ok()
    assert outage.delay() == 0.0


def test_a_task_message_too_large_for_its_queue_is_stored_apart(backend: Backend) -> None:
    client = WorkflowClient(backend)
    blob = "x" * 60_000  # fine on the embedded store; over a Storage queue's 48 KiB
    defn = load_definition(
        f"name: big\ntasks:\n  - name: t\n    kwargs: {{cmd: 'true', x_blob: {blob}}}\n")
    wf = client.submit(defn).id
    coord = Coordinator(backend, Settings(), children=client)
    queue = backend.queues.get("default")
    msgs: list[Message] = []
    deadline = time.monotonic() + 60
    while not msgs and time.monotonic() < deadline:
        coord.step()
        msgs = queue.receive(1, 30)
    [msg] = msgs
    assert len(msg.body) <= queue.max_message_bytes
    task = decode_task(msg.body)
    assert (task.payload_ref is not None) == (queue.max_message_bytes < 60_000)
    assert expand(backend, task).kwargs["x_blob"] == blob
    assert client.row(wf).status == "running"

"""Preemption notices: a fake Scheduled Events endpoint on a loopback socket announces a
Spot eviction of worker A's VM; A releases its task within the notice and worker B
finishes it without a failed attempt. Parsing of event documents is checked directly."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from dagq.worker.preemption import find_notice, vm_name_from_metadata
from tests.worker.stack import SCRIPTS, Stack, wait_file

PY = sys.executable
NOTICE_S = 30


class FakeMetadata:
    """Scheduled Events and the compute name of one VM, served over HTTP on loopback."""

    def __init__(self, vm: str) -> None:
        self.vm = vm
        self.document: dict[str, Any] = {"DocumentIncarnation": 1, "Events": []}
        self.headers: list[str | None] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.headers.append(self.headers.get("Metadata"))
                if self.headers.get("Metadata") != "true":
                    self.send_response(400)
                    self.end_headers()
                    return
                if self.path.startswith("/metadata/instance/compute/name"):
                    body = fake.vm.encode()
                else:
                    body = json.dumps(fake.document).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{port}/metadata/scheduledevents?api-version=2020-07-01"

    def preempt(self, resources: list[str], not_before: float) -> None:
        self.document = {"DocumentIncarnation": 2, "Events": [{
            "EventId": "A123BC45-1234-5678-AB90-ABCDEF123456", "EventType": "Preempt",
            "ResourceType": "VirtualMachine", "Resources": resources,
            "EventStatus": "Scheduled", "NotBefore": formatdate(not_before, usegmt=True),
            "Description": "", "EventSource": "Platform", "DurationInSeconds": -1}]}


@pytest.fixture
def metadata() -> Iterator[FakeMetadata]:
    m = FakeMetadata("vm-a")
    yield m
    m.server.shutdown()


def test_events_for_other_vms_or_of_other_kinds_do_not_count() -> None:
    doc = {"Events": [
        {"EventId": "1", "EventType": "Freeze", "Resources": ["vm-a"]},
        {"EventId": "2", "EventType": "Preempt", "Resources": ["vm-b"]},
    ]}
    assert find_notice(doc, "vm-a") is None
    doc["Events"].append({"EventId": "3", "EventType": "Terminate", "Resources": ["vm-a"],
                          "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT"})
    notice = find_notice(doc, "vm-a")
    assert notice is not None and (notice.event_id, notice.event_type) == ("3", "Terminate")
    assert notice.not_before == 1474309787.0
    assert find_notice({"Events": [{"EventType": "Preempt", "Resources": ["x"]}]}, None)
    assert find_notice({"Events": None}, "vm-a") is None


def test_vm_name_comes_from_the_same_metadata_service(metadata: FakeMetadata) -> None:
    assert vm_name_from_metadata(metadata.url) == "vm-a"
    assert vm_name_from_metadata("http://127.0.0.1:9/metadata/scheduledevents") is None


@pytest.mark.slow
def test_a_preempt_notice_releases_the_task_to_another_worker_within_the_notice(
        sqlite_stack: Stack, metadata: FakeMetadata) -> None:
    stack, probe = sqlite_stack, sqlite_stack.root / "probe"
    probe.mkdir()
    stack.coordinator()
    a = stack.worker("spot", env={"DAGQ_SCHEDULED_EVENTS_URL": metadata.url})
    wf = stack.submit("spot", [{"name": "train", "kwargs": {
        "cmd": f"{PY} {SCRIPTS / 'preempt.py'} {probe} 1"}}], default_queue="spot")
    wait_file(probe / "first")
    b = stack.worker("spot")  # on another VM: no notice for it
    stack.wait_heartbeat(b)

    noticed = time.time()
    metadata.preempt(["vm-b", "vm-a"], noticed + NOTICE_S)
    assert a.wait(NOTICE_S) == 0, a.text()  # released and exited inside the notice
    assert "Preempt event" in a.text() and "released=1" in a.text(), a.text()
    assert wait_file(probe / "term") == (probe / "first").read_text()  # it got SIGTERM

    assert stack.wait_terminal(wf, deadline_s=30) == "completed"
    assert (probe / "second").read_text() == "1 after-term"
    task = stack.tasks(wf)["train"]
    assert (task["status"], task["attempt"]) == ("completed", 1)  # not a failed attempt
    assert set(metadata.headers) == {"true"}
    assert b.stop() == 0

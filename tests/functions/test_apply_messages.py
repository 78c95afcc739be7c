"""Coordinator.apply_messages: messages a trigger already received, settled by the trigger."""

from __future__ import annotations

from dagq.client import WorkflowClient
from dagq.config import Settings
from dagq.core.parse import load_definition
from dagq.ports import Backend
from dagq.protocol.messages import CompletionMessage, ControlMessage
from dagq.protocol.names import COMPLETIONS
from dagq.runtime.coordinator import Coordinator

ONE = "name: one\ntasks:\n  - {name: t, kwargs: {cmd: 'true'}}\n"


def test_groups_applies_and_reports_without_settling(backend: Backend) -> None:
    client = WorkflowClient(backend)
    ids = [client.submit(load_definition(ONE), workflow_id=f"w{i}").id for i in range(2)]
    queued = backend.queues.get(COMPLETIONS).approximate_count()
    coord = Coordinator(backend, Settings(), children=WorkflowClient(backend))
    bodies: list[tuple[str, bytes | str]] = [
        ("s0", ControlMessage(ids[0], "start", f"{ids[0]}/start").encode()),
        ("bad", b"{"),
        ("s1", ControlMessage(ids[1], "start", f"{ids[1]}/start").encode().decode()),
        ("c0", CompletionMessage(ids[0], "t", 1, success=True, output=7).encode()),
        ("ghost", ControlMessage("no-such-workflow", "start", "x").encode()),
    ]
    result = coord.apply_messages(bodies)
    assert result.unapplied == []
    [(bad_id, reason)] = result.rejected
    assert bad_id == "bad" and "not JSON" in reason
    assert client.summary(ids[0])["status"] == "completed"
    assert client.output(ids[0], "t") == 7
    assert client.summary(ids[1])["status"] == "running"
    # nothing was received or deleted: settling is the trigger's job
    assert backend.queues.get(COMPLETIONS).approximate_count() == queued

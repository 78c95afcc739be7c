"""Cancel and retry are CAS writes: a coordinator writing the same state meanwhile loses
nothing, and neither does the cancel or the retry."""

from __future__ import annotations

from pathlib import Path

from dagq.backends import open_backend
from dagq.client import WorkflowClient
from dagq.config import Settings
from dagq.core.model import TaskDef, WorkflowDef
from dagq.ports import Backend
from dagq.protocol.messages import CompletionMessage, decode_completion_queue
from dagq.runtime.coordinator import Coordinator

WF = WorkflowDef("race", (TaskDef("a", {"cmd": "true"}), TaskDef("b", {"cmd": "true"}),
                          TaskDef("c", {"cmd": "true"}, ("a", "b"))))


class RacingStates:
    """The state store with a fault injected: before the first ``replace`` of a chosen
    workflow, ``race()`` runs (a coordinator's write that makes the caller's ETag stale)."""

    def __init__(self, inner: object, race: object) -> None:
        self.inner, self.race, self.armed = inner, race, True

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def replace(self, workflow_id: str, data: bytes, etag: str) -> str:
        if self.armed:
            self.armed = False
            self.race()  # type: ignore[operator]
        return self.inner.replace(workflow_id, data, etag)  # type: ignore[attr-defined, no-any-return]


def started(tmp_path: Path) -> tuple[Backend, WorkflowClient, Coordinator]:
    backend = open_backend(f"sqlite:{tmp_path / 'x.db'}")
    client = WorkflowClient(backend)
    coord = Coordinator(backend, Settings(store=f"sqlite:{tmp_path / 'x.db'}"),
                        children=WorkflowClient(backend))
    client.submit(WF, workflow_id="w")
    coord.step()  # start: a and b dispatched
    return backend, client, coord


def complete(backend: Backend, coord: Coordinator, task: str, success: bool) -> None:
    msg = CompletionMessage("w", task, 1, success=success, error=None if success else "boom")
    backend.queues.get("completions").send(msg.encode())
    coord.step()


def test_cancel_racing_a_coordinator_write_keeps_both(tmp_path: Path) -> None:
    backend, client, coord = started(tmp_path)
    racing = RacingStates(backend.states, lambda: complete(backend, coord, "a", True))
    backend.states = racing  # type: ignore[misc]
    client.control.sleep = lambda s: None  # no worker runs b: settle at once
    state = client.cancel("w")
    assert not racing.armed  # the race happened, the cancel was applied to its result
    views = {v.name: v.status for v in state.iter_task_views()}
    assert views == {"a": "completed", "b": "cancelled", "c": "cancelled"}
    assert state.status == "cancelled" and state.cancel_requested


def test_retry_racing_a_coordinator_write_keeps_both(tmp_path: Path) -> None:
    backend, client, coord = started(tmp_path)
    complete(backend, coord, "a", False)
    racing = RacingStates(backend.states, lambda: complete(backend, coord, "b", True))
    backend.states = racing  # type: ignore[misc]
    client.retry("w", request_id="r1")
    assert not racing.armed
    state = client.state("w")
    views = {v.name: v.status for v in state.iter_task_views()}
    assert views == {"a": "pending", "b": "completed", "c": "pending"}
    assert state.status == "running"
    client.retry("w", request_id="r1")  # the same request again changes nothing
    assert {v.name: v.status for v in client.state("w").iter_task_views()} == views
    queued = [decode_completion_queue(m.body)
              for m in backend.queues.get("completions").receive(10, 30)]
    # one hand-over for the coordinator (the repeat has the same message id)
    assert [(q.action, q.applied) for q in queued if hasattr(q, "action")] == [
        ("retry", True)]

"""Tools of the cancel/retry race tests: a store whose calls can be interrupted by another
request, a workflow with running attempts, and the check that the stop signal agrees
with the state."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

from dagq.backends import open_backend
from dagq.client import WorkflowClient
from dagq.config import Settings
from dagq.core import engine
from dagq.core.engine import loads
from dagq.core.model import TaskDef, WorkflowDef
from dagq.ports import Backend
from dagq.protocol.cancels import CANCELS
from dagq.protocol.messages import TaskMessage
from dagq.runtime.control import Control
from dagq.runtime.coordinator import Coordinator
from dagq.worker.gate import Gate

WF = WorkflowDef("race", (TaskDef("a", {"cmd": "sleep 25"}), TaskDef("b", {"cmd": "true"}),
                          TaskDef("c", {"cmd": "true"}, ("a", "b"))))
"""``a`` and ``b`` run (no worker ever reports them), ``c`` waits for both."""


class Interrupting:
    """A store part whose calls run ``hook(name)`` first (where another request may run)."""

    def __init__(self, inner: object, hook: Callable[[str], None]) -> None:
        self._inner, self._hook = inner, hook

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._hook(name)
            return attr(*args, **kwargs)
        return call


def interrupting(backend: Backend, hook: Callable[[str], None]) -> Backend:
    """``backend`` seen through ``Interrupting`` states, index and records."""
    return cast(Backend, SimpleNamespace(
        states=Interrupting(backend.states, hook), index=Interrupting(backend.index, hook),
        records=Interrupting(backend.records, hook), queues=backend.queues))


def started(store: str, workflow_id: str = "w",
            connection: str | None = None) -> tuple[Backend, Coordinator]:
    """A store holding ``WF`` as ``workflow_id`` with ``a`` and ``b`` running."""
    backend = open_backend(store, connection_string=connection)
    settings = Settings(store=store, storage_connection_string=connection)
    coord = Coordinator(backend, settings, children=WorkflowClient(backend))
    WorkflowClient(backend).submit(WF, workflow_id=workflow_id)
    coord.step()
    return backend, coord


@dataclass
class Running:
    """A running attempt as a worker's cancel poll sees it (``Stoppable``)."""

    task: TaskMessage
    stop: threading.Event = field(default_factory=threading.Event)
    cancelled: bool = False


def disagreement(backend: Backend, workflow_id: str) -> str | None:
    """None if the stop signal (cancel hint, index flag, and what a worker's cancel poll
    does to the running attempts) agrees with the stored state, else what differs."""
    state = loads(backend.states.read(workflow_id)[0])
    hinted = workflow_id in dict(backend.records.list(CANCELS))
    flagged = backend.index.get(workflow_id).cancel_requested
    stopping = set(engine.stopping_keys(state))
    running = [Running(TaskMessage(workflow_id, t, a, engine.attempt_key(state, t)))
               for t in ("a", "b") if (a := state.attempt[state.graph.index[t]])]
    Gate(backend, backend.queues.get("completions"), "probe", Counter()).poll(running)
    stopped = {r.task.key for r in running if r.cancelled}
    wanted = state.cancel_requested
    if hinted == wanted and flagged == wanted and stopped == stopping:
        return None
    return (f"state cancel_requested={state.cancel_requested} status={state.status} "
            f"stopping={sorted(stopping)}; hint={hinted} flag={flagged} "
            f"worker stopped={sorted(stopped)}")


def cancel(control: Control, workflow_id: str) -> None:
    """A cancel as ``dagq cancel --no-wait`` sends it (no settling)."""
    control.cancel(workflow_id, settle=False)


def retry(control: Control, workflow_id: str) -> None:
    """A retry as ``dagq retry`` sends it."""
    control.retry(workflow_id)

"""WorkflowClient: submit, inspect, cancel and retry workflows on any backend.

The CLI, the HTTP API and the coordinator (for child workflows) all use this class; it
holds no engine logic beyond creating the initial state. Every state transition after
submission is applied by the coordinator from messages on the completion queue.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dagq.core import engine
from dagq.core.engine.state import WorkflowState, dumps, loads
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES, OutputRef, WorkflowDef
from dagq.core.params import apply_params
from dagq.core.parse import definition_hash
from dagq.core.transforms import sequentialize_fan_in
from dagq.core.validate import validate
from dagq.crashpoints import crash_point
from dagq.errors import (
    AlreadyExists,
    DefinitionError,
    IdConflict,
    NotFound,
    TaskError,
    WorkflowNotFound,
)
from dagq.ports import Backend, IndexRow
from dagq.protocol.messages import ControlAction, ControlMessage

COMPLETIONS = "completions"
"""Logical name of the completion queue."""

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._~-]{0,199}$")


@dataclass(frozen=True)
class Submitted:
    """Result of a submission."""

    id: str
    """Workflow id."""
    created: bool
    """False when an identical workflow with this id already existed."""


def check_workflow_id(workflow_id: str) -> None:
    """Raise ``DefinitionError`` if ``workflow_id`` cannot name a workflow."""
    if not _ID_RE.match(workflow_id):
        from dagq.errors import Problem

        raise DefinitionError([Problem(
            f"workflow id {workflow_id!r} is invalid: use 1-200 letters, digits, '.', '_', '~'"
            " or '-', starting with a letter or digit", field="id")])


def new_workflow_id(name: str, now: float) -> str:
    """A fresh, time-ordered, readable id such as ``train-20261130T210501-3f9a1c``."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "wf"
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
    return f"{slug}-{stamp}-{uuid.uuid4().hex[:6]}"


class WorkflowClient:
    """Operations on workflows stored in ``backend``."""

    def __init__(self, backend: Backend, clock: Callable[[], float] = time.time) -> None:
        self.backend = backend
        self.clock = clock

    # -- submission --------------------------------------------------------------------
    def submit(
        self,
        defn: WorkflowDef,
        *,
        workflow_id: str | None = None,
        max_fan_in: int | None = None,
        parent: engine.ParentLink | None = None,
        extra: dict[str, Any] | None = None,
        start_delay_s: float = 0.0,
        params: Mapping[str, Any] | None = None,
    ) -> Submitted:
        """Validate and store a new workflow, then ask the coordinator to start it.

        With ``workflow_id`` the call is idempotent: the same definition returns the
        existing id (``created=False``); a different one raises ``IdConflict``.
        Invalid definitions raise ``DefinitionError`` and write nothing. ``params`` are
        run parameters over the definition's own ``params``; declared defaults are
        filled in, and unknown, missing or ill-typed parameters are errors.
        """
        defn = apply_params(defn, params)
        problems = validate(defn)
        if problems:
            raise DefinitionError(problems)
        if max_fan_in is not None:
            defn = sequentialize_fan_in(defn, max_fan_in)
        now = self.clock()
        if workflow_id is None:
            workflow_id = new_workflow_id(defn.name, now)
        else:
            check_workflow_id(workflow_id)
        digest = definition_hash(defn)
        extra = dict(extra or {})
        if start_delay_s > 0:
            extra["not_before"] = now + start_delay_s
        row = IndexRow(
            id=workflow_id, name=defn.name, status="pending", counts={"pending": len(defn.tasks)},
            created_at=now, updated_at=now, definition_hash=digest,
            parent_id=parent.workflow_id if parent else None,
            parent_task=parent.task if parent else None, extra=extra,
        )
        created = True
        try:
            self.backend.index.create(row)
        except AlreadyExists:
            existing = self.backend.index.get(workflow_id)
            if existing.definition_hash != digest:
                raise IdConflict(
                    f"workflow id {workflow_id!r} is already used by a different definition "
                    f"({existing.name!r}); choose another --id or submit the same definition"
                ) from None
            created = False
        crash_point("submit_after_index")
        state = engine.create(defn, workflow_id, now, parent=parent)
        with contextlib.suppress(AlreadyExists):
            self.backend.states.create(workflow_id, dumps(state))
        crash_point("submit_after_state")
        self._control(workflow_id, "start", request_id=f"{workflow_id}/start",
                      delay_s=start_delay_s)
        return Submitted(workflow_id, created)

    # -- control -----------------------------------------------------------------------
    def cancel(self, workflow_id: str) -> None:
        """Request cancellation of a workflow and all its active descendants: the flag
        survives restarts; the coordinator applies it and workers stop running tasks."""
        try:
            self.backend.index.request_cancel(workflow_id)
        except NotFound:
            raise WorkflowNotFound(f"no workflow with id {workflow_id!r}") from None
        self._control(workflow_id, "cancel", request_id=f"{workflow_id}/{uuid.uuid4().hex[:12]}")
        for row in self.descendants(workflow_id):
            if row.status not in TERMINAL_WORKFLOW_STATUSES:
                self.backend.index.request_cancel(row.id)
                self._control(row.id, "cancel", request_id=f"{row.id}/{uuid.uuid4().hex[:12]}")

    def retry(self, workflow_id: str, *, parent: engine.ParentLink | None = None,
              request_id: str | None = None) -> str:
        """Ask the coordinator to retry failed, upstream-failed and cancelled tasks.

        ``parent`` re-attaches a child workflow to its parent task's new attempt.
        """
        self.row(workflow_id)
        self.backend.index.request_cancel(workflow_id, requested=False)
        request_id = request_id or f"{workflow_id}/retry/{uuid.uuid4().hex[:12]}"
        body = ControlMessage(workflow_id, "retry", request_id,
                              parent.attempt if parent else None).encode()
        self.backend.queues.get(COMPLETIONS).send(body, message_id=request_id,
                                                  session_id=workflow_id)
        return request_id

    def descendants(self, workflow_id: str) -> list[IndexRow]:
        """Index rows of every child workflow below ``workflow_id``, in id order."""
        prefix = f"{workflow_id}~"
        out: list[IndexRow] = []
        after = prefix
        while True:
            rows = self.backend.index.query(after=after, limit=200)
            for r in rows:
                if not r.id.startswith(prefix):
                    return out
                if r.parent_id and (r.parent_id == workflow_id
                                    or r.parent_id.startswith(prefix)):
                    out.append(r)
            if len(rows) < 200:
                return out
            after = rows[-1].id

    def _control(self, workflow_id: str, action: ControlAction, request_id: str,
                 delay_s: float = 0.0) -> None:
        body = ControlMessage(workflow_id, action, request_id).encode()
        self.backend.queues.get(COMPLETIONS).send(
            body, delay_s=delay_s, message_id=f"{request_id}/{action}",
            session_id=workflow_id,
        )

    # -- inspection --------------------------------------------------------------------
    def row(self, workflow_id: str) -> IndexRow:
        """The workflow's index row; raises ``WorkflowNotFound``."""
        try:
            return self.backend.index.get(workflow_id)
        except NotFound:
            raise WorkflowNotFound(
                f"no workflow with id {workflow_id!r} (check the id with `dagq list`)"
            ) from None

    def state(self, workflow_id: str) -> WorkflowState:
        """The workflow's full runtime state; raises ``WorkflowNotFound``."""
        try:
            data, _ = self.backend.states.read(workflow_id)
        except NotFound:
            raise WorkflowNotFound(f"no workflow with id {workflow_id!r}") from None
        return loads(data)

    def summary(self, workflow_id: str) -> dict[str, Any]:
        """``{"id","name","status","counts",...}`` as printed by ``dagq status --json``."""
        row = self.row(workflow_id)
        return row_summary(row)

    def list_workflows(
        self, status: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Summaries of workflows, optionally only those with ``status``."""
        return [row_summary(r) for r in self.backend.index.query(status=status, limit=limit)]

    def tasks(
        self, workflow_id: str, *, prefix: str | None = None, status: str | None = None,
        queue: str | None = None,
    ) -> list[dict[str, Any]]:
        """The workflow's tasks (name, status, queue, attempt, ...) matching the filters."""
        state = self.state(workflow_id)
        out = []
        for view in state.iter_task_views():
            if prefix and not view.name.startswith(prefix):
                continue
            if status and view.status != status:
                continue
            if queue and view.queue != queue:
                continue
            out.append(task_summary(view))
        return out

    def output(self, workflow_id: str, task: str) -> Any:
        """The task's output (large outputs fetched and MD5-checked); ``None`` if none."""
        state = self.state(workflow_id)
        try:
            view = state.task_view(task)
        except KeyError:
            raise TaskError(f"workflow {workflow_id!r} has no task {task!r}") from None
        if view.output_ref is not None:
            return self.fetch_output(view.output_ref)
        return view.output

    def fetch_output(self, ref: OutputRef) -> Any:
        """Load a stored output and verify its MD5."""
        return json.loads(fetch_verified(self.backend, ref))


def fetch_verified(backend: Backend, ref: OutputRef) -> bytes:
    """Bytes of ``ref`` from output storage, checked against its MD5."""
    import hashlib

    data = backend.outputs.get(ref.name)
    digest = hashlib.md5(data, usedforsecurity=False).hexdigest()
    if digest != ref.md5:
        raise TaskError(f"output {ref.name} is corrupt: MD5 {digest} != expected {ref.md5}")
    return data


def row_summary(row: IndexRow) -> dict[str, Any]:
    """A JSON-ready summary of an index row."""
    out: dict[str, Any] = {
        "id": row.id, "name": row.name, "status": row.status, "counts": dict(row.counts),
        "created_at": row.created_at, "updated_at": row.updated_at,
        "cancel_requested": row.cancel_requested,
    }
    if row.parent_id:
        out["parent_id"] = row.parent_id
        out["parent_task"] = row.parent_task
    if row.extra:
        out["extra"] = row.extra
    return out


def task_summary(view: Any) -> dict[str, Any]:
    """A JSON-ready summary of one task view."""
    return {
        "name": view.name, "status": view.status, "queue": view.queue,
        "attempt": view.attempt, "error": view.error, "note": view.note,
        "dispatched_at": view.dispatched_at, "finished_at": view.finished_at,
        "due_at": view.due_at,
        "has_output": view.output is not None or view.output_ref is not None,
    }

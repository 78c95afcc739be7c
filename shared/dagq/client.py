"""WorkflowClient: submit, inspect, cancel and retry workflows on any backend.

The CLI, the HTTP API and the coordinator (for child workflows) all use this class; it
holds no engine logic beyond creating the initial state and applying cancel and retry
(``dagq.runtime.control``); every other transition is applied by the coordinator from messages
on the completion queue.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dagq.core import engine
from dagq.core.engine import WorkflowState, loads
from dagq.core.explain import explain
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES, OutputRef, WorkflowDef
from dagq.core.name_rules import workflow_id_problem
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
    TaskNotFound,
    WorkflowNotFound,
)
from dagq.gc_pause import paused
from dagq.ports import Backend, IndexRow
from dagq.protocol import names
from dagq.protocol.http import Submitted
from dagq.protocol.messages import ControlAction, ControlMessage
from dagq.protocol.outputs import fetch_verified
from dagq.protocol.synced import download_synced, list_synced, read_synced
from dagq.protocol.tasklogs import read_log
from dagq.runtime.control import Control
from dagq.views import task_rows
from dagq.views.listing import WorkflowFilter, list_page, row_summary
from dagq.views.observe import explanations, gather_facts, graph_of
from dagq.views.task_details import LogRead, attempt_finished
from dagq.views.task_rows import TaskPage
from dagq.views.waiting import poll_until_terminal


def check_workflow_id(workflow_id: str) -> None:
    """Raise ``DefinitionError`` if ``workflow_id`` cannot name a workflow."""
    if (problem := workflow_id_problem(workflow_id)) is not None:
        from dagq.errors import Problem

        raise DefinitionError([Problem(problem, field="id")])


def new_workflow_id(name: str, now: float) -> str:
    """A fresh, time-ordered, readable id such as ``train-20261130T210501-3f9a1c``."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "wf"
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
    return f"{slug}-{stamp}-{uuid.uuid4().hex[:6]}"


def no_such_task(state: WorkflowState, task: str) -> TaskNotFound:
    """The error for a task name ``state`` does not hold, with the closest names."""
    close = difflib.get_close_matches(task, state.graph.names, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else \
        f" (its tasks: dagq tasks {state.workflow_id})"
    return TaskNotFound(f"workflow {state.workflow_id!r} has no task {task!r}{hint}")


class WorkflowClient:
    """Operations on workflows stored in ``backend``."""

    def __init__(self, backend: Backend, clock: Callable[[], float] = time.time,
                 outbox_grace_s: float = 30.0) -> None:
        self.backend = backend
        self.clock = clock
        self.outbox_grace_s = outbox_grace_s
        """When ``explain`` calls an unsent dispatch stale (``DAGQ_OUTBOX_GRACE``)."""
        self.control = Control(backend, clock)

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
        reuse: Mapping[str, engine.Reused] | None = None,
    ) -> Submitted:
        """Validate and store a new workflow, then ask the coordinator to start it.

        With ``workflow_id`` the call is idempotent: the same definition returns the
        existing id (``created=False``); a different one raises ``IdConflict``.
        Invalid definitions raise ``DefinitionError`` and write nothing. ``params`` are
        run parameters over the definition's own ``params``; declared defaults are
        filled in, and unknown, missing or ill-typed parameters are errors. ``reuse``
        gives tasks completed with results of another run (``engine.seed``).
        """
        with paused():
            return self._submit(defn, workflow_id, max_fan_in, parent, extra, start_delay_s,
                                params, reuse)

    def _submit(self, defn: WorkflowDef, workflow_id: str | None, max_fan_in: int | None,
                parent: engine.ParentLink | None, extra: dict[str, Any] | None,
                start_delay_s: float, params: Mapping[str, Any] | None,
                reuse: Mapping[str, engine.Reused] | None = None) -> Submitted:
        defn = apply_params(defn, params)
        problems = validate(defn)
        if problems:
            raise DefinitionError(problems)
        if max_fan_in is not None:
            defn = sequentialize_fan_in(defn, max_fan_in)
        now = self.clock()
        # only an id the caller chose can be submitted twice: a row under an id made here
        # stores no hash (a 100,000-task definition takes 0.2 s to hash), and a later
        # submit under that id hashes the stored definition instead
        digest = ""
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
            if self._stored_hash(existing) != (digest or definition_hash(defn)):
                raise IdConflict(
                    f"workflow id {workflow_id!r} is already used by a different definition "
                    f"({existing.name!r}); choose another --id or submit the same definition"
                ) from None
            created = False
        crash_point("submit_after_index")
        state = engine.create(defn, workflow_id, now, parent=parent)
        if reuse:
            engine.seed(state, now, reuse)
        with contextlib.suppress(AlreadyExists):
            self.control.writer.create(workflow_id, state)
        crash_point("submit_after_state")
        self._control(workflow_id, "start", request_id=f"{workflow_id}/start",
                      delay_s=start_delay_s)
        return Submitted(workflow_id, created)

    def _stored_hash(self, row: IndexRow) -> str:
        """The hash of the definition stored under ``row``: the row's own, else the stored
        state's definition hashed ("" when there is no state yet)."""
        if row.definition_hash:
            return row.definition_hash
        try:
            return definition_hash(self.state(row.id).definition)
        except WorkflowNotFound:
            return ""

    # -- control -----------------------------------------------------------------------
    def cancel(self, workflow_id: str, *, settle: bool = True,
               on_written: Callable[[], object] | None = None,
               reason: str | None = None) -> WorkflowState:
        """Cancel a workflow and all its active descendants; see ``dagq.runtime.control``.

        When this returns, tasks that had not started are ``cancelled`` and running ones
        are being stopped (``settle=False`` leaves attempts no worker runs to the
        coordinator's sweep). Raises ``WorkflowFinished`` if the workflow already ended."""
        self.row(workflow_id)
        children = tuple(r.id for r in self.descendants(workflow_id)
                         if r.status not in TERMINAL_WORKFLOW_STATUSES)
        return self.control.cancel(workflow_id, children=children, settle=settle,
                                   on_written=on_written, reason=reason)

    def retry(self, workflow_id: str, *, parent: engine.ParentLink | None = None,
              request_id: str | None = None, tasks: Sequence[str] = ()) -> str:
        """Reset failed, upstream-failed and cancelled tasks; the coordinator runs them.

        The reset is visible when this returns; raises ``WorkflowFinished`` for a
        completed workflow. ``parent`` re-attaches a child workflow to its parent task's
        new attempt. With ``tasks``, only those and the tasks after them run again, even
        completed ones. Returns the request id."""
        self.row(workflow_id)
        return self.control.retry(workflow_id, parent=parent, request_id=request_id,
                                  tasks=tuple(tasks))[0]

    def suspend(self, workflow_id: str, suspended: bool = True) -> WorkflowState:
        """Stop starting tasks of a running workflow (``suspended=False`` resumes it)."""
        self.row(workflow_id)
        return self.control.suspend(workflow_id, suspended)

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
        self.backend.queues.get(names.COMPLETIONS).send(
            body, delay_s=delay_s, message_id=names.control_id(request_id, action),
            session_id=names.session_id(workflow_id),
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

    def status(self, workflow_id: str) -> dict[str, Any]:
        """What ``dagq status --json`` prints: the summary, plus ``children`` (summaries of
        every child workflow below this one) when there are any."""
        summary = self.summary(workflow_id)
        with contextlib.suppress(WorkflowNotFound):
            state = self.state(workflow_id)
            if state.suspended:
                summary["suspended"] = True
            if state.cancel_reason:
                summary["cancel_reason"] = state.cancel_reason
        children = [row_summary(r) for r in self.descendants(workflow_id)]
        if children:
            summary["children"] = children
        return summary

    def wait(self, workflow_id: str, timeout_s: float | None = None, *,
             interval_s: float = 1.0) -> dict[str, Any]:
        """Poll until the workflow is terminal or ``timeout_s`` has passed; its ``status``
        then (still running when the time ran out: check ``status``)."""
        poll_until_terminal(lambda: self.summary(workflow_id), timeout_s, interval_s=interval_s)
        return self.status(workflow_id)

    def list_workflows(
        self, status: str | None = None, limit: int | None = None, *,
        since: float | None = None, name: str | None = None,
    ) -> list[dict[str, Any]]:
        """Summaries of workflows, newest first: only those with ``status``, created at
        or after ``since`` (epoch seconds) and whose name contains ``name``; at most
        ``limit`` (``dagq.views.listing``: the HTTP API lists the same way)."""
        where = WorkflowFilter(status=status, since=since, name=name)
        page = list_page(self.backend.index, where, order="newest", limit=limit)
        return [row_summary(r) for r in page.rows]

    def tasks(
        self, workflow_id: str, *, prefix: str | None = None, status: str | None = None,
        queue: str | None = None, offset: int = 0, limit: int | None = None,
        expand: bool = False,
    ) -> list[dict[str, Any]]:
        """The workflow's tasks (name, status, phase, queue, attempt, ...) matching the
        filters, in definition order, from ``offset`` and at most ``limit``; ``phase``
        tells a queued or waiting ``running`` task from a started one. A mapped task's
        instances are folded into its row unless ``expand`` (``dagq.views.task_rows``)."""
        return self.task_page(workflow_id, prefix=prefix, status=status, queue=queue,
                              offset=offset, limit=limit, counted=False, expand=expand).rows

    def task_page(
        self, workflow_id: str, *, prefix: str | None = None, status: str | None = None,
        queue: str | None = None, offset: int = 0, limit: int | None = None,
        attention_first: bool = False, counted: bool = True, expand: bool = False,
    ) -> TaskPage:
        """A page of ``tasks`` with how many matched and the counts over every task;
        with ``attention_first``, failed and running tasks come first when the page
        cannot hold every match; ``counted=False`` leaves the counts out. Only the
        page's rows are built, so a page of a huge workflow stays quick."""
        state = self.state(workflow_id)
        facts = gather_facts(self.backend, state, self.clock())
        ids = task_rows.select(state, prefix=prefix, status=status, queue=queue,
                               expand=expand)
        if attention_first and limit is not None and offset + limit < len(ids):
            ids = task_rows.attention_order(state, ids)
        page = ids[offset:offset + limit if limit is not None else None]
        # counts look at every running task: only for callers that show them
        shown, phases = task_rows.counts(state, facts) if counted else ({}, {})
        return TaskPage(task_rows.rows(self.backend.records, state, page, facts), len(ids),
                        shown, phases)

    def explain(self, workflow_id: str, task: str | None = None) -> list[dict[str, Any]]:
        """Why each task (or ``task``) is where it is (see ``dagq.core.explain``)."""
        state = self.state(workflow_id)
        if task is not None and task not in state.graph.index:
            raise no_such_task(state, task)
        return explanations(self.backend, state, self.clock(), task, self.outbox_grace_s)

    def graph(self, workflow_id: str) -> dict[str, Any]:
        """The run's graph model: tasks, dependencies, statuses and phases."""
        return graph_of(self.backend, self.state(workflow_id), self.clock())

    def task(self, workflow_id: str, task: str) -> dict[str, Any]:
        """One task's summary with its attempt history and why it is where it is
        (``explanation``); ``TaskNotFound`` if there is none."""
        state = self.state(workflow_id)
        index = state.graph.index.get(task)
        if index is None:
            raise no_such_task(state, task)
        facts = gather_facts(self.backend, state, self.clock(), self.outbox_grace_s)
        (row,) = task_rows.rows(self.backend.records, state, [index], facts)
        (why,) = explain(state, facts, task)
        row["explanation"] = why.to_json()
        return row

    def logs(self, workflow_id: str, task: str, attempt: int | None = None,
             offset: int = 0, limit: int | None = None, follow: bool = False) -> LogRead:
        """What ``attempt`` (default: the latest) of ``task`` printed, from byte
        ``offset``; ``TaskNotFound`` for an unknown task or attempt. With ``follow`` the
        tail of a capped attempt still running is left out (it is rewritten as it runs)
        so that offsets stay valid; it comes once the attempt has ended."""
        state = self.state(workflow_id)
        try:
            view = state.task_view(task)
        except KeyError:
            raise no_such_task(state, task) from None
        attempt = view.attempt if attempt is None else attempt
        if attempt < 1 or attempt > view.attempt:
            raise TaskNotFound(f"task {task!r} of workflow {workflow_id!r} has no attempt "
                            f"{attempt} (attempts so far: {view.attempt})")
        finished = attempt_finished(state, task, attempt)  # before reading: no byte missed
        data, end = read_log(self.backend.outputs, workflow_id, task, attempt, offset, limit,
                             open_tail=finished or not follow)
        return LogRead(attempt, data, end, finished)

    def output(self, workflow_id: str, task: str) -> Any:
        """The task's output (large outputs fetched and MD5-checked); ``None`` if none."""
        state = self.state(workflow_id)
        try:
            view = state.task_view(task)
        except KeyError:
            raise no_such_task(state, task) from None
        if view.output_ref is not None:
            return self.fetch_output(view.output_ref)
        return view.output

    def files(self, workflow_id: str, task: str) -> list[dict[str, Any]]:
        """``[{"path","size","md5"}]`` of the files ``task`` synced (``kwargs.bg_dirsync_to``);
        ``task`` is the task's name or the ``dest`` its sync spec gave."""
        self.row(workflow_id)
        return [{"path": p, "size": n, "md5": m}
                for p, n, m in list_synced(self.backend.outputs, workflow_id, task)]

    def file(self, workflow_id: str, task: str, path: str) -> bytes:
        """One synced file, MD5-checked; ``NotFound`` when ``task`` synced no such file."""
        self.row(workflow_id)
        return read_synced(self.backend.outputs, workflow_id, task, path)

    def download_files(self, workflow_id: str, task: str, dest: Path) -> list[Path]:
        """Write the files ``task`` synced into directory ``dest``; the paths written."""
        self.row(workflow_id)
        return download_synced(self.backend.outputs, workflow_id, task, dest)

    def fetch_output(self, ref: OutputRef) -> Any:
        """Load a stored output and verify its MD5."""
        return json.loads(fetch_verified(self.backend, ref))

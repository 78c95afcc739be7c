"""Commands that inspect and steer workflows: status, list, tasks, output, cancel, retry.

``validate`` and ``submit`` are in ``dagq.cli.submitting``."""

from __future__ import annotations

import sys
import time
from typing import Any, NoReturn

import click

from dagq.cli.common import NoStore, emit_json, handle_errors, open_client, piped, store_option
from dagq.cli.exits import ALREADY_FINISHED
from dagq.cli.render import (
    duration_text,
    print_lines,
    print_status,
    print_table,
    print_tasks,
    time_text,
)
from dagq.cli.since import SINCE
from dagq.core.model import TASK_STATUSES, TERMINAL_WORKFLOW_STATUSES, WORKFLOW_STATUSES
from dagq.errors import WorkflowFinished, WorkflowNotFound
from dagq.views.task_rows import TaskPage


@click.command()
@click.argument("workflow_id")
@click.option("--limit", type=click.IntRange(min=0), default=50, show_default=True,
              help="Most task rows shown (0: all); with --json, all unless given.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@store_option
@click.pass_context
@handle_errors
def status(ctx: click.Context, workflow_id: str, limit: int, as_json: bool,
           store: str | None) -> None:
    """Show a workflow's status, counts and tasks (failed and running ones first when
    there are more than --limit).

    JSON adds "phases" (tasks per phase: queued and waiting apart from started),
    "tasks" (the rows of `dagq tasks --json`) and "tasks_total". Piped, it prints
    tab-separated lines whose first field says what they are: workflow, child, task."""
    client = open_client(ctx, store)
    summary = client.status(workflow_id)
    if as_json and ctx.get_parameter_source("limit") == click.core.ParameterSource.DEFAULT:
        limit = 0
    try:
        page = client.task_page(workflow_id, limit=limit or None, attention_first=bool(limit))
    except WorkflowNotFound:  # an index row whose state is not written yet
        page = TaskPage([], 0)
    if as_json:
        emit_json({**summary, "phases": page.phases, "tasks": page.rows,
                   "tasks_total": page.total})
        return
    if piped():
        print_status_lines(summary, page)
        return
    print_status(summary, page)


def print_status_lines(summary: dict[str, Any], page: TaskPage) -> None:
    """``dagq status`` for scripts: ``workflow``, ``child`` and ``task`` lines, tab-separated,
    no header, nothing shortened, times ISO-8601 UTC."""
    from rich.console import Console

    from dagq.cli.common import iso_time
    from dagq.cli.render import detail_text, more_note, shown_status, started_at

    def counts(c: dict[str, int]) -> str:
        return " ".join(f"{k}={v}" for k, v in sorted(c.items()) if v)

    def when(t: Any) -> str:
        return iso_time(float(t)) if isinstance(t, int | float) else ""

    rows: list[list[Any]] = [["workflow", summary["id"], summary["name"], summary["status"],
                              counts(page.counts if page.total else summary["counts"]),
                              when(summary.get("created_at")), when(summary.get("updated_at"))]]
    rows += [["child", c["id"], c.get("parent_task") or "", c["status"], counts(c["counts"]),
              when(c.get("created_at")), when(c.get("updated_at"))]
             for c in summary.get("children") or []]
    rows += [["task", t["name"], shown_status(t), t["queue"], t["attempt"],
              when(started_at(t)), when(t.get("finished_at")),
              detail_text(t, time.time())]
             for t in page.rows]
    print_lines(rows)
    more_note(summary["id"], page, Console(stderr=True))  # for people; stdout stays data


@click.command(name="list")
@click.option("--status", "status_", type=click.Choice(WORKFLOW_STATUSES), default=None)
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="At most this many (newest first).")
@click.option("--since", type=SINCE, default=None, metavar="WHEN",
              help="Only those created since WHEN: 30m, 2h, 1d or 2026-12-01[T10:00].")
@click.option("--name", default=None, help="Only those whose name contains this.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@store_option
@click.pass_context
@handle_errors
def list_(ctx: click.Context, status_: str | None, limit: int | None, since: float | None,
          name: str | None, as_json: bool, store: str | None) -> None:
    """List workflows, newest first (none, with a note, where no store exists yet)."""
    try:
        rows = open_client(ctx, store).list_workflows(status=status_, limit=limit,
                                                      since=since, name=name)
    except NoStore as exc:
        click.echo(f"{exc}", err=True)
        rows = []
    if as_json:
        emit_json(rows)
        return
    now = time.time()
    print_table(["id", "name", "status", "started", "duration", "tasks"], [
        [r["id"], r["name"], r["status"], time_text(r["created_at"], now),
         duration_text((r["updated_at"] if r["status"] in TERMINAL_WORKFLOW_STATUSES
                        else now) - r["created_at"]),
         " ".join(f"{k}={v}" for k, v in sorted(r["counts"].items()) if v)] for r in rows])


@click.command()
@click.argument("workflow_id", required=False)
@click.option("--workflow", "workflow_opt", default=None, hidden=True,
              help="The workflow id (the older spelling of the argument).")
@click.option("--prefix", default=None, help="Only tasks whose name starts with this.")
@click.option("--status", "status_", type=click.Choice(TASK_STATUSES), default=None)
@click.option("--queue", default=None, help="Only tasks on this queue.")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="At most this many tasks.")
@click.option("--offset", type=click.IntRange(min=0), default=0,
              help="Skip this many matching tasks first.")
@click.option("--expand", is_flag=True,
              help="List each mapped task's instances after its folded row.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@store_option
@click.pass_context
@handle_errors
def tasks(ctx: click.Context, workflow_id: str | None, workflow_opt: str | None,
          prefix: str | None, status_: str | None, queue: str | None, limit: int | None,
          offset: int, expand: bool, as_json: bool, store: str | None) -> None:
    """List the tasks of workflow WORKFLOW_ID, filtered by name prefix, status and queue;
    --offset and --limit page through them (in definition order)."""
    if workflow_id and workflow_opt and workflow_id != workflow_opt:
        raise click.UsageError("give the workflow id once (as the argument)")
    workflow_id = workflow_id or workflow_opt
    if not workflow_id:
        raise click.UsageError("missing the workflow id: dagq tasks WORKFLOW_ID")
    rows = open_client(ctx, store).tasks(workflow_id, prefix=prefix, status=status_, queue=queue,
                                         offset=offset, limit=limit, expand=expand)
    if as_json:
        emit_json(rows)
        return
    print_tasks(rows)


@click.command()
@click.argument("workflow_id")
@click.argument("task")
@click.option("--json", "as_json", is_flag=True,
              help='Print {"workflow","task","status","attempt","output"} (the output '
                   "alone is printed without it).")
@store_option
@click.pass_context
@handle_errors
def output(ctx: click.Context, workflow_id: str, task: str, as_json: bool,
           store: str | None) -> None:
    """Print a task's output as JSON (null if it has none)."""
    client = open_client(ctx, store)
    value = client.output(workflow_id, task)
    if not as_json:
        emit_json(value)
        return
    info = client.task(workflow_id, task)
    emit_json({"workflow": workflow_id, "task": task, "status": info["status"],
               "attempt": info["attempt"], "output": value})


@click.command()
@click.argument("workflow_id")
@click.option("--reason", default=None,
              help="Why: kept with the workflow and shown as the cancelled tasks' error.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the workflow's summary after the cancel.")
@store_option
@click.pass_context
@handle_errors
def cancel(ctx: click.Context, workflow_id: str, reason: str | None, as_json: bool,
           store: str | None) -> None:
    """Cancel a workflow: nothing new starts and running tasks are stopped.

    Exit 0 when cancelled (or being cancelled), 6 if it had already finished (nothing
    changes), 5 if there is no such workflow."""
    client = open_client(ctx, store)
    try:
        client.cancel(workflow_id, reason=reason)
    except WorkflowFinished as exc:
        _finished(exc, as_json)
    row = client.summary(workflow_id)
    if row["status"] == "cancelled":
        click.echo(f"{workflow_id} cancelled", err=True)
    else:
        running = len(client.tasks(workflow_id, status="running"))  # the state, not the index
        click.echo(f"{workflow_id} cancelling: {running} running task(s) are being stopped",
                   err=True)
    if as_json:
        emit_json(row)


@click.command()
@click.argument("workflow_id")
@click.option("--task", "tasks", multiple=True, metavar="TASK",
              help="Run this task again, and every task after it, whatever their status "
                   "(repeatable); without it, the failed tasks are retried.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the workflow's summary and the request id after the retry.")
@store_option
@click.pass_context
@handle_errors
def retry(ctx: click.Context, workflow_id: str, tasks: tuple[str, ...], as_json: bool,
          store: str | None) -> None:
    """Retry failed, upstream-failed and cancelled tasks; a coordinator runs them.
    With --task, that task and the tasks after it run again (even completed ones).

    Exit 0 when the tasks are reset, 6 if the workflow already completed (nothing
    changes), 5 if there is no such workflow or task."""
    client = open_client(ctx, store)
    try:
        request_id = client.retry(workflow_id, tasks=tasks)
    except WorkflowFinished as exc:
        _finished(exc, as_json)
    row = client.summary(workflow_id)
    counts = "  ".join(f"{k}={v}" for k, v in sorted(row["counts"].items()) if v)
    click.echo(f"{workflow_id} {row['status']}: {counts}", err=True)
    if as_json:
        emit_json({**row, "request_id": request_id})


def _finished(exc: WorkflowFinished, as_json: bool) -> NoReturn:
    """Report that cancel/retry found nothing to do (the workflow already ended); exit 6."""
    click.echo(f"{exc}", err=True)
    if as_json:
        emit_json({"id": exc.workflow_id, "status": exc.status, "finished": True})
    sys.exit(ALREADY_FINISHED)


COMMANDS = (status, list_, tasks, output, cancel, retry)
"""The commands this module adds to ``dagq``."""

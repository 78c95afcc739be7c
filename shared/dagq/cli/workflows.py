"""Commands that submit and inspect workflows: validate, submit, status, list, tasks,
output, cancel, retry."""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn

import click

from dagq.cli.common import emit_json, handle_errors, open_client, settings_from, store_option
from dagq.cli.params import param_option, with_params
from dagq.cli.render import (
    duration_text,
    print_status,
    print_table,
    print_tasks,
    progress_bar,
    time_text,
)
from dagq.cli.since import SINCE
from dagq.compose.loader import load_file
from dagq.core.model import TASK_STATUSES, TERMINAL_WORKFLOW_STATUSES, WORKFLOW_STATUSES
from dagq.core.transforms import sequentialize_fan_in
from dagq.errors import DagqError, DefinitionError, WorkflowFinished, WorkflowNotFound
from dagq.gc_pause import paused
from dagq.protocol.http import Submitted
from dagq.views.task_rows import TaskPage

EXIT_FINISHED = 3
"""Exit code of ``cancel``/``retry`` when the workflow already ended: nothing changed."""


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True,
              help='Print [{"file","valid","tasks","problems"}] on stdout.')
def validate(files: tuple[str, ...], as_json: bool) -> None:
    """Check definition FILES offline; exit 1 if any is invalid."""
    bad = 0
    report: list[dict[str, Any]] = []
    for path in files:
        try:
            defn = load_file(path)
        except DefinitionError as exc:
            bad += 1
            report.append({"file": path, "valid": False, "tasks": None,
                           "problems": [str(p) for p in exc.problems]})
            click.echo(f"{path}: invalid", err=True)
            for p in exc.problems:
                click.echo(f"  - {p}", err=True)
            continue
        report.append({"file": path, "valid": True, "tasks": len(defn.tasks), "problems": []})
        click.echo(f"{path}: ok ({len(defn.tasks)} tasks)", err=True)
    if as_json:
        emit_json(report)
    sys.exit(1 if bad else 0)


@click.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--id", "workflow_id", default=None, help="Workflow id (idempotent; one file only).")
@click.option("--max-fan-in", type=click.IntRange(min=2), default=None,
              help="Restructure tasks with more dependencies than this into batches.")
@click.option("--concurrency", type=click.IntRange(min=1), default=None,
              help="Submissions in flight at once [default: 20; 1 on the embedded store, "
                   "whose single writer threads only slow down].")
@param_option
@click.option("--wait", "wait_", is_flag=True,
              help="Then wait for the workflows to end (exit codes of `dagq wait`).")
@click.option("--watch", "watch_", is_flag=True,
              help="Then follow the workflow live (one file; exit codes of `dagq wait`).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0), default=None,
              help="With --wait/--watch: give up after this many seconds (exit 4).")
@click.option("--json", "as_json", is_flag=True,
              help='Print [{"file","id","created"}] instead of one id per line.')
@store_option
@click.pass_context
@handle_errors
def submit(ctx: click.Context, files: tuple[str, ...], workflow_id: str | None,
           max_fan_in: int | None, concurrency: int | None, params: tuple[str, ...], wait_: bool,
           watch_: bool, timeout_s: float | None, as_json: bool, store: str | None) -> None:
    """Submit workflow FILES (or paths read from stdin); print one id per line."""
    if wait_ and watch_:
        raise click.UsageError("use either --wait or --watch, not both")
    paths = list(files)
    if not paths and not sys.stdin.isatty():
        paths = [line.strip() for line in sys.stdin if line.strip()]
    if not paths:
        raise click.UsageError("give definition files as arguments or one path per line on stdin")
    if workflow_id and len(paths) > 1:
        raise click.UsageError("--id can only be used with a single file")
    if watch_ and len(paths) > 1:
        raise click.UsageError("--watch follows one workflow: give a single file (or --wait)")
    with paused():  # loading and storing allocate much and free nothing cyclic
        defs = []
        failed = False
        for path in paths:  # validate everything first: bad input writes nothing
            try:
                defn = with_params(load_file(path), params)
                if max_fan_in is not None:  # a definition the transform refuses is bad input too
                    sequentialize_fan_in(defn, max_fan_in)
                defs.append(defn)
            except DefinitionError as exc:
                failed = True
                click.echo(f"error: {exc}", err=True)
        if failed:
            sys.exit(1)
        client = open_client(ctx, store)
        if concurrency is None:
            remote = bool((ctx.find_root().params or {}).get("api"))
            concurrency = 20 if remote or not settings_from(ctx, store).is_embedded else 1
        errors: list[str] = []

        def one(defn: Any) -> Submitted | None:
            try:
                return client.submit(defn, workflow_id=workflow_id, max_fan_in=max_fan_in)
            except DagqError as exc:
                errors.append(f"{defn.name}: {exc}")
                return None

        ids: list[str] = []
        report: list[dict[str, Any]] = []
        with progress_bar(len(defs), "submitting") as advance, \
                ThreadPoolExecutor(min(concurrency, len(defs))) as pool:
            for path, done in zip(paths, pool.map(one, defs), strict=True):
                advance()
                if done is not None:
                    if not as_json:
                        click.echo(done.id)
                    ids.append(done.id)
                    report.append({"file": path, "id": done.id, "created": done.created})
    if as_json:
        emit_json(report)
    for e in errors:
        click.echo(f"error: {e}", err=True)
    if errors or not (wait_ or watch_):
        sys.exit(1 if errors else 0)
    sys.stdout.flush()
    from dagq.cli.follow import wait_for, watch_workflow

    if watch_:
        sys.exit(watch_workflow(client, ids[0], 1.0, timeout_s))
    sys.exit(wait_for(client, ids, timeout_s, 1.0))


@click.command()
@click.argument("workflow_id")
@click.option("--limit", type=click.IntRange(min=0), default=50, show_default=True,
              help="Most task rows shown (0: all).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@store_option
@click.pass_context
@handle_errors
def status(ctx: click.Context, workflow_id: str, limit: int, as_json: bool,
           store: str | None) -> None:
    """Show a workflow's status, counts and tasks (failed and running ones first when
    there are more than --limit).

    JSON adds "phases": tasks per phase (queued and waiting apart from started)."""
    client = open_client(ctx, store)
    summary = client.status(workflow_id)
    try:
        page = client.task_page(workflow_id, limit=0 if as_json else limit or None,
                                attention_first=bool(limit))
    except WorkflowNotFound:  # an index row whose state is not written yet
        page = TaskPage([], 0)
    if as_json:
        emit_json({**summary, "phases": page.phases})
        return
    print_status(summary, page)


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
    """List workflows, newest first."""
    rows = open_client(ctx, store).list_workflows(status=status_, limit=limit, since=since,
                                                  name=name)
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
@click.option("--workflow", "workflow_id", required=True, help="Workflow id.")
@click.option("--prefix", default=None, help="Only tasks whose name starts with this.")
@click.option("--status", "status_", type=click.Choice(TASK_STATUSES), default=None)
@click.option("--queue", default=None, help="Only tasks on this queue.")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="At most this many tasks.")
@click.option("--offset", type=click.IntRange(min=0), default=0,
              help="Skip this many matching tasks first.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@store_option
@click.pass_context
@handle_errors
def tasks(ctx: click.Context, workflow_id: str, prefix: str | None, status_: str | None,
          queue: str | None, limit: int | None, offset: int, as_json: bool,
          store: str | None) -> None:
    """List a workflow's tasks, filtered by name prefix, status and queue; --offset and
    --limit page through them (in definition order)."""
    rows = open_client(ctx, store).tasks(workflow_id, prefix=prefix, status=status_, queue=queue,
                                         offset=offset, limit=limit)
    if as_json:
        emit_json(rows)
        return
    print_tasks(rows)


@click.command()
@click.argument("workflow_id")
@click.argument("task")
@store_option
@click.pass_context
@handle_errors
def output(ctx: click.Context, workflow_id: str, task: str, store: str | None) -> None:
    """Print a task's output as JSON (null if it has none)."""
    emit_json(open_client(ctx, store).output(workflow_id, task))


@click.command()
@click.argument("workflow_id")
@click.option("--json", "as_json", is_flag=True,
              help="Print the workflow's summary after the cancel.")
@store_option
@click.pass_context
@handle_errors
def cancel(ctx: click.Context, workflow_id: str, as_json: bool, store: str | None) -> None:
    """Cancel a workflow: nothing new starts and running tasks are stopped.

    Exit 0 when cancelled (or being cancelled), 3 if it had already finished (nothing
    changes), 1 if there is no such workflow."""
    client = open_client(ctx, store)
    try:
        client.cancel(workflow_id)
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
@click.option("--json", "as_json", is_flag=True,
              help="Print the workflow's summary and the request id after the retry.")
@store_option
@click.pass_context
@handle_errors
def retry(ctx: click.Context, workflow_id: str, as_json: bool, store: str | None) -> None:
    """Retry failed, upstream-failed and cancelled tasks; a coordinator runs them.

    Exit 0 when the tasks are reset, 3 if the workflow already completed (nothing
    changes), 1 if there is no such workflow."""
    client = open_client(ctx, store)
    try:
        request_id = client.retry(workflow_id)
    except WorkflowFinished as exc:
        _finished(exc, as_json)
    row = client.summary(workflow_id)
    counts = "  ".join(f"{k}={v}" for k, v in sorted(row["counts"].items()) if v)
    click.echo(f"{workflow_id} {row['status']}: {counts}", err=True)
    if as_json:
        emit_json({**row, "request_id": request_id})



def _finished(exc: WorkflowFinished, as_json: bool) -> NoReturn:
    """Report that cancel/retry found nothing to do (the workflow already ended); exit 3."""
    click.echo(f"{exc}", err=True)
    if as_json:
        emit_json({"id": exc.workflow_id, "status": exc.status, "finished": True})
    sys.exit(EXIT_FINISHED)


COMMANDS = (validate, submit, status, list_, tasks, output, cancel, retry)
"""The commands this module adds to ``dagq``."""

"""Commands that submit and inspect workflows: validate, submit, status, list, tasks,
output, cancel, retry."""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import click

from dagq.backends.wiring import backend_from_settings
from dagq.cli.main import cli, handle_errors, settings_from, store_option
from dagq.cli.params import param_option, with_params
from dagq.cli.render import due_text, print_status, print_table, progress_bar
from dagq.client import WorkflowClient, row_summary
from dagq.compose.loader import load_file
from dagq.core.model import TASK_STATUSES, WORKFLOW_STATUSES
from dagq.core.transforms import sequentialize_fan_in
from dagq.errors import DagqError, DefinitionError


def open_client(ctx: click.Context, store: str | None) -> WorkflowClient:
    """A client on the configured store."""
    return WorkflowClient(backend_from_settings(settings_from(ctx, store)))


def emit_json(value: Any) -> None:
    """Print one JSON document on stdout."""
    click.echo(json.dumps(value, indent=2, sort_keys=False, default=str))


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
def validate(files: tuple[str, ...]) -> None:
    """Check definition FILES offline; exit 1 if any is invalid (problems on stderr)."""
    bad = 0
    for path in files:
        try:
            defn = load_file(path)
        except DefinitionError as exc:
            bad += 1
            click.echo(f"{path}: invalid", err=True)
            for p in exc.problems:
                click.echo(f"  - {p}", err=True)
            continue
        click.echo(f"{path}: ok ({len(defn.tasks)} tasks)", err=True)
    sys.exit(1 if bad else 0)


@cli.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--id", "workflow_id", default=None, help="Workflow id (idempotent; one file only).")
@click.option("--max-fan-in", type=click.IntRange(min=2), default=None,
              help="Restructure tasks with more dependencies than this into batches.")
@click.option("--concurrency", type=click.IntRange(min=1), default=20, show_default=True,
              help="Submissions in flight at once.")
@param_option
@store_option
@click.pass_context
@handle_errors
def submit(ctx: click.Context, files: tuple[str, ...], workflow_id: str | None,
           max_fan_in: int | None, concurrency: int, params: tuple[str, ...],
           store: str | None) -> None:
    """Submit workflow FILES (or paths read from stdin); print one id per line."""
    paths = list(files)
    if not paths and not sys.stdin.isatty():
        paths = [line.strip() for line in sys.stdin if line.strip()]
    if not paths:
        raise click.UsageError("give definition files as arguments or one path per line on stdin")
    if workflow_id and len(paths) > 1:
        raise click.UsageError("--id can only be used with a single file")
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
    errors: list[str] = []

    def one(defn: Any) -> str | None:
        try:
            return client.submit(defn, workflow_id=workflow_id, max_fan_in=max_fan_in).id
        except DagqError as exc:
            errors.append(f"{defn.name}: {exc}")
            return None

    with progress_bar(len(defs), "submitting") as advance, \
            ThreadPoolExecutor(min(concurrency, len(defs))) as pool:
        for wf_id in pool.map(one, defs):
            advance()
            if wf_id is not None:
                click.echo(wf_id)
    for e in errors:
        click.echo(f"error: {e}", err=True)
    sys.exit(1 if errors else 0)


@cli.command()
@click.argument("workflow_id")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@store_option
@click.pass_context
@handle_errors
def status(ctx: click.Context, workflow_id: str, as_json: bool, store: str | None) -> None:
    """Show a workflow's status, counts and tasks."""
    client = open_client(ctx, store)
    summary = client.summary(workflow_id)
    children = [row_summary(r) for r in client.descendants(workflow_id)]
    if children:
        summary["children"] = children
    if as_json:
        emit_json(summary)
        return
    print_status(summary, client.tasks(workflow_id))


@cli.command(name="list")
@click.option("--status", "status_", type=click.Choice(WORKFLOW_STATUSES), default=None)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@store_option
@click.pass_context
@handle_errors
def list_(ctx: click.Context, status_: str | None, as_json: bool, store: str | None) -> None:
    """List workflows (optionally by status)."""
    rows = open_client(ctx, store).list_workflows(status=status_)
    if as_json:
        emit_json(rows)
        return
    print_table(["id", "name", "status", "tasks"], [
        [r["id"], r["name"], r["status"],
         " ".join(f"{k}={v}" for k, v in sorted(r["counts"].items()) if v)] for r in rows])


@cli.command()
@click.option("--workflow", "workflow_id", required=True, help="Workflow id.")
@click.option("--prefix", default=None, help="Only tasks whose name starts with this.")
@click.option("--status", "status_", type=click.Choice(TASK_STATUSES), default=None)
@click.option("--queue", default=None, help="Only tasks on this queue.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@store_option
@click.pass_context
@handle_errors
def tasks(ctx: click.Context, workflow_id: str, prefix: str | None, status_: str | None,
          queue: str | None, as_json: bool, store: str | None) -> None:
    """List a workflow's tasks, filtered by name prefix, status and queue."""
    rows = open_client(ctx, store).tasks(workflow_id, prefix=prefix, status=status_, queue=queue)
    if as_json:
        emit_json(rows)
        return
    now = time.time()
    print_table(["name", "status", "queue", "attempt", "error"], [
        [r["name"], r["status"], r["queue"], r["attempt"], due_text(r.get("due_at"), now) or (
            (r["error"] or r["note"] or "").splitlines()[0][:60] if (r["error"] or r["note"])
            else "")]
        for r in rows])


@cli.command()
@click.argument("workflow_id")
@click.argument("task")
@store_option
@click.pass_context
@handle_errors
def output(ctx: click.Context, workflow_id: str, task: str, store: str | None) -> None:
    """Print a task's output as JSON (null if it has none)."""
    emit_json(open_client(ctx, store).output(workflow_id, task))


@cli.command()
@click.argument("workflow_id")
@store_option
@click.pass_context
@handle_errors
def cancel(ctx: click.Context, workflow_id: str, store: str | None) -> None:
    """Cancel a workflow: nothing new starts and running tasks are stopped."""
    open_client(ctx, store).cancel(workflow_id)
    click.echo(f"cancel requested for {workflow_id}", err=True)


@cli.command()
@click.argument("workflow_id")
@store_option
@click.pass_context
@handle_errors
def retry(ctx: click.Context, workflow_id: str, store: str | None) -> None:
    """Retry failed, upstream-failed and cancelled tasks of a finished workflow."""
    open_client(ctx, store).retry(workflow_id)
    click.echo(f"retry requested for {workflow_id}", err=True)

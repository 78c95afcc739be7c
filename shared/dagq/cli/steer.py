"""``dagq suspend``, ``dagq resume`` and ``dagq delete``: steer one workflow.

``suspend`` stops tasks from starting (tasks already running finish, their retries
included) and ``resume`` lets the workflow go on; both are in the stored state when
they return, on a store as through ``--api``. ``delete`` removes one finished workflow
with its children and everything they stored, like ``dagq prune`` does for old ones.
"""

from __future__ import annotations

import sys

import click

from dagq.cli.common import (
    emit_json,
    handle_errors,
    open_client,
    remote,
    store_backend,
    store_option,
)
from dagq.cli.exits import ALREADY_FINISHED
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES
from dagq.errors import WorkflowFinished
from dagq.ops.retention import Removed, delete_workflow


def _steer(ctx: click.Context, workflow_id: str, suspended: bool, as_json: bool,
           store: str | None) -> None:
    client = open_client(ctx, store)
    try:
        client.suspend(workflow_id, suspended)
    except WorkflowFinished as exc:
        click.echo(f"{exc}", err=True)
        sys.exit(ALREADY_FINISHED)
    row = client.summary(workflow_id)
    what = "suspended: no task starts until dagq resume" if suspended else "resumed"
    click.echo(f"{workflow_id} {what}", err=True)
    if as_json:
        emit_json(row)


@click.command()
@click.argument("workflow_id")
@click.option("--json", "as_json", is_flag=True, help="Print the workflow's summary.")
@store_option
@click.pass_context
@handle_errors
def suspend(ctx: click.Context, workflow_id: str, as_json: bool, store: str | None) -> None:
    """Suspend a running workflow: no task starts; running ones finish. Exit 6 if it
    already ended, 5 if there is no such workflow."""
    _steer(ctx, workflow_id, True, as_json, store)


@click.command()
@click.argument("workflow_id")
@click.option("--json", "as_json", is_flag=True, help="Print the workflow's summary.")
@store_option
@click.pass_context
@handle_errors
def resume(ctx: click.Context, workflow_id: str, as_json: bool, store: str | None) -> None:
    """Resume a suspended workflow: the tasks that became ready are sent. Exit 6 if it
    already ended, 5 if there is no such workflow."""
    _steer(ctx, workflow_id, False, as_json, store)


@click.command()
@click.argument("workflow_id")
@click.option("--force", is_flag=True, help="Cancel it first if it is still running.")
@store_option
@click.pass_context
@handle_errors
def delete(ctx: click.Context, workflow_id: str, force: bool, store: str | None) -> None:
    """Delete one finished workflow, its child workflows and everything they stored
    (logs, history, outputs, files). Cache entries it made stay (see dagq cache clear)."""
    if remote(ctx):
        raise click.UsageError("dagq delete works on a store (--store), not through --api")
    client = open_client(ctx, store)
    row = client.summary(workflow_id)
    if row["status"] not in TERMINAL_WORKFLOW_STATUSES:
        if not force:
            raise click.UsageError(f"workflow {workflow_id} is {row['status']}; cancel it "
                                   "first, or give --force to cancel and delete it")
        client.cancel(workflow_id)
    backend = store_backend(ctx, store, what="dagq delete")
    removed = Removed()
    for child in reversed([r["id"] for r in client.list_workflows()
                           if r["id"].startswith(f"{workflow_id}~")]):
        delete_workflow(backend, child, removed)
    delete_workflow(backend, workflow_id, removed)
    click.echo(f"deleted {workflow_id} ({removed.workflows} workflow(s), {removed.objects} "
               f"stored objects, {removed.records} attempt records)", err=True)


COMMANDS = (suspend, resume, delete)
"""The commands this module adds to ``dagq``."""

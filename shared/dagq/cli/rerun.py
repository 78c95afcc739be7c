"""``dagq rerun ID [--from TASK]``: run a finished workflow again as a new run
(``dagq.ops.rerun``)."""

from __future__ import annotations

import sys

import click

from dagq.cli.common import (
    check_store_exists,
    handle_errors,
    refuse_remote,
    settings_from,
    store_option,
)
from dagq.cli.exits import OK, USAGE
from dagq.client import WorkflowClient, no_such_task
from dagq.ops.rerun import NotFinished, rerun
from dagq.wiring import backend_from_settings


@click.command(name="rerun")
@click.argument("workflow_id")
@click.option("--from", "from_task", default=None, metavar="TASK",
              help="Run TASK and every task after it again (not from the cache); every "
                   "other task keeps the result it had.")
@click.option("--id", "new_id", default=None, help="Id of the new run (idempotent).")
@click.option("--wait", "wait_", is_flag=True,
              help="Then wait for the new run to end (exit codes of `dagq wait`).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0), default=None,
              help="With --wait: give up after this many seconds (exit 4).")
@store_option
@click.pass_context
@handle_errors
def rerun_(ctx: click.Context, workflow_id: str, from_task: str | None, new_id: str | None,
           wait_: bool, timeout_s: float | None, store: str | None) -> None:
    """Run a finished workflow again as a new run; print its id.

    The same definition and parameters. Without --from the cache decides what runs;
    with --from TASK, TASK and what follows it run again and nothing before it does.

    Exit 2 when the workflow has not finished, 5 when it or TASK does not exist."""
    refuse_remote(ctx, "dagq rerun")
    settings = settings_from(ctx, store)
    check_store_exists(settings)
    client = WorkflowClient(backend_from_settings(settings))
    if from_task is not None:
        state = client.state(workflow_id)
        if from_task not in state.graph.index:
            raise no_such_task(state, from_task)
    try:
        done = rerun(client, workflow_id, from_task=from_task, new_id=new_id)
    except NotFinished as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(USAGE)
    click.echo(done.id)
    if not wait_:
        sys.exit(OK)
    sys.stdout.flush()
    from dagq.cli.follow import wait_for

    sys.exit(wait_for(client, [done.id], timeout_s, 1.0))


COMMANDS = (rerun_,)
"""The commands this module adds to ``dagq``."""

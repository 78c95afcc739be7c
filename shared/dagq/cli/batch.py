"""``dagq batch-feed``: turn a queue's backlog into Azure Batch worker tasks."""

from __future__ import annotations

import os
import signal
import threading
import time

import click

from dagq.cli.common import handle_errors, settings_from, store_option
from dagq.errors import StoreError
from dagq.wiring import backend_from_settings


@click.command(name="batch-feed")
@click.argument("queue")
@click.option("--batch-url", required=True, envvar="DAGQ_BATCH_URL",
              help="Batch account endpoint, e.g. https://ACCOUNT.REGION.batch.azure.com.")
@click.option("--job", "job_id", required=True, help="Job that holds the worker tasks.")
@click.option("--task-file", required=True, type=click.Path(dir_okay=False),
              help="Worker task body (workers/deploy/batch/task.json).")
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True,
              help="Tasks one worker runs at once (waiting messages per worker task).")
@click.option("--max-tasks", type=click.IntRange(min=1), default=20, show_default=True,
              help="Most worker tasks kept active (roughly the pool's node limit).")
@click.option("--interval", type=float, default=30.0, show_default=True,
              help="Seconds between rounds.")
@click.option("--once", is_flag=True, help="Run one round and exit.")
@store_option
@click.pass_context
@handle_errors
def batch_feed(ctx: click.Context, queue: str, batch_url: str, job_id: str, task_file: str,
               concurrency: int, max_tasks: int, interval: float, once: bool,
               store: str | None) -> None:
    """Keep ceil(waiting messages / concurrency) worker tasks active in a Batch job, so the
    pool's autoscale formula (on $PendingTasks) follows QUEUE's length."""
    # the Batch client needs the Azure extra; import it only when the command runs
    from dagq.worker.batch_feeder import BatchJob, default_token, feed_once, load_template

    template = load_template(task_file)
    backend = backend_from_settings(settings_from(ctx, store))
    token = os.environ.get("DAGQ_BATCH_TOKEN")
    job = BatchJob(batch_url, job_id, (lambda: token) if token else default_token())
    q = backend.queues.get(queue)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    added_total = 0
    while True:
        try:
            backlog, active, added = feed_once(q, job, template, concurrency=concurrency,
                                               max_tasks=max_tasks, now=time.time())
        except StoreError as exc:
            if once:
                raise
            # a long-running feeder outlives a failed round: say why, try again next round
            click.echo(f"batch-feed: this round failed, retrying in {interval:g} s: {exc}",
                       err=True)
        else:
            added_total += added
            click.echo(f"queue {queue}: {backlog} waiting, {active} worker tasks active, "
                       f"added {added}", err=True)
        if once or stop.wait(interval):
            break
    click.echo(f"batch-feed stopped: added {added_total} worker task(s)", err=True)


COMMANDS = (batch_feed,)
"""The commands this module adds to ``dagq``."""

"""``dagq prune``: remove finished workflows older than an age, with their logs, records,
outputs, files and child workflows."""

from __future__ import annotations

import time

import click

from dagq.cli.common import handle_errors, store_backend, store_option
from dagq.ops.retention import parse_age, prune


def _age(ctx: click.Context, param: click.Parameter, value: str) -> float:
    try:
        return parse_age(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command(name="prune")
@click.option("--older-than", "older_than", required=True, callback=_age, metavar="AGE",
              help="Remove finished workflows last updated longer ago than this "
                   "(e.g. 30d, 12h, 90m).")
@click.option("--dry-run", is_flag=True, help="Only print the ids that would be removed.")
@click.option("--cache", "cache", is_flag=True,
              help="Also remove the task cache entries those workflows made. Without it "
                   "they are kept and stay valid: an entry keeps its own copy of a large "
                   "output (under cache/), so later runs still reuse it.")
@store_option
@click.pass_context
@handle_errors
def prune_(ctx: click.Context, older_than: float, dry_run: bool, cache: bool,
           store: str | None) -> None:
    """Remove completed, failed and cancelled workflows older than AGE, with everything
    they stored (logs, attempt history, outputs, files, child workflows); one id per line.
    Task cache entries they made are kept unless --cache is given."""
    backend = store_backend(ctx, store, what="dagq prune")
    ids, removed = prune(backend, older_than, time.time(), dry_run=dry_run, cache=cache)
    for wf in ids:
        click.echo(wf)
    entries = f", {removed.cache_entries} cache entries" if cache else ""
    if dry_run:
        click.echo(f"{len(ids)} workflow(s) would be removed{entries}", err=True)
    else:
        click.echo(f"removed {len(ids)} workflow(s) ({removed.workflows} with children, "
                   f"{removed.objects} stored objects, {removed.records} attempt records"
                   f"{entries})", err=True)


COMMANDS = (prune_,)
"""The commands this module adds to ``dagq``."""

"""``dagq trigger ...``: event triggers that start a workflow when a file or blob lands
under a prefix (stored in the store like schedules), and ``dagq trigger watch``, the
embedded runtime's polling watcher (``dagq scheduler`` runs it too)."""

from __future__ import annotations

import os
import signal
import threading
from datetime import UTC, datetime

import click

from dagq.cli.common import emit_json, handle_errors, piped, settings_from, store_option
from dagq.cli.render import print_lines
from dagq.compose.loader import load_file
from dagq.triggers.fire import Fired
from dagq.triggers.store import Trigger, TriggerStore, default_source, parse_source
from dagq.triggers.watcher import Watcher
from dagq.wiring import backend_from_settings


def _store(ctx: click.Context, store: str | None) -> TriggerStore:
    return TriggerStore(backend_from_settings(settings_from(ctx, store)))


def _summary(t: Trigger) -> dict[str, str]:
    return {"name": t.name, "source": t.source, "prefix": t.prefix, "param": t.param,
            "workflow": t.definition.name,
            "created_at": t.created_at.astimezone(UTC).isoformat().replace("+00:00", "Z")}


@click.group()
def trigger() -> None:
    """Event triggers: start a workflow when a file or blob lands under a prefix."""


@trigger.command()
@click.argument("name")
@click.option("--prefix", required=True, metavar="PATH",
              help="Files (a local path prefix, e.g. inbox/) or blobs (CONTAINER/PATH/) "
                   "under this prefix start a run.")
@click.option("--file", "file", required=True, type=click.Path(dir_okay=False),
              help="The workflow each run starts.")
@click.option("--param-name", "param", default="path", show_default=True,
              help="The run parameter that receives the file's or blob's path.")
@click.option("--source", type=click.Choice(["files", "blob"]), default=None,
              help="files: local files, polled by `dagq trigger watch` / `dagq scheduler`; "
                   "blob: blobs of the store's account, delivered by Event Grid to the "
                   "Function App [default: blob on an Azure store, files otherwise].")
@store_option
@click.pass_context
@handle_errors
def add(ctx: click.Context, name: str, prefix: str, file: str, param: str,
        source: str | None, store: str | None) -> None:
    """Add trigger NAME: one run of FILE per new version of each object under --prefix."""
    settings = settings_from(ctx, store)
    kind = parse_source(source) if source else default_source(settings.store)
    if kind == "files":  # the watcher compares absolute paths
        tail = os.sep if prefix.endswith(("/", os.sep)) else ""
        prefix = os.path.abspath(prefix) + tail
    t = Trigger(name=name, source=kind, prefix=prefix, param=param,
                definition=load_file(file), created_at=datetime.now(UTC))
    TriggerStore(backend_from_settings(settings)).add(t)
    click.echo(name)
    click.echo(f"added trigger {name!r} ({t.definition.name}) on {kind} under {prefix}",
               err=True)


@trigger.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@store_option
@click.pass_context
@handle_errors
def list_(ctx: click.Context, as_json: bool, store: str | None) -> None:
    """List triggers."""
    rows = [_summary(t) for t in _store(ctx, store).list()]
    if as_json:
        emit_json(rows)
        return
    table = [[r["name"], r["source"], r["prefix"], r["param"], r["workflow"]] for r in rows]
    if piped():
        print_lines(table)
        return
    for row in [["name", "source", "prefix", "param", "workflow"], *table]:
        click.echo("  ".join(row))


@trigger.command()
@click.argument("name")
@store_option
@click.pass_context
@handle_errors
def remove(ctx: click.Context, name: str, store: str | None) -> None:
    """Remove trigger NAME (the runs it started stay)."""
    _store(ctx, store).remove(name)
    click.echo(f"removed trigger {name!r}", err=True)


def print_fired(fired: list[Fired]) -> None:
    """One line per run a poll asked for."""
    for f in fired:
        if f.error:
            click.echo(f"error: trigger {f.trigger}: {f.path}: {f.error}", err=True)
        else:
            click.echo(f"submitted {f.run_id} (trigger {f.trigger}, {f.path}"
                       f"{'' if f.created else ', already existed'})")


@trigger.command()
@click.option("--interval", type=click.FloatRange(min=0.05), default=2.0, show_default=True,
              help="Seconds between polls.")
@click.option("--settle", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Seconds a file must stay unchanged before it fires.")
@click.option("--once", is_flag=True, help="Poll once and exit (1 if a run was refused).")
@store_option
@click.pass_context
@handle_errors
def watch(ctx: click.Context, interval: float, settle: float, once: bool,
          store: str | None) -> None:
    """Poll the directories of `files` triggers and start one run per new file version."""
    watcher = Watcher(backend_from_settings(settings_from(ctx, store)), settle_s=settle)
    stop = threading.Event()
    if not once:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    errors = 0
    while True:
        fired = watcher.poll()
        print_fired(fired)
        errors += sum(1 for f in fired if f.error)
        if once or stop.wait(interval):
            break
    if once and errors:
        raise SystemExit(1)


COMMANDS = (trigger,)
"""The commands this module adds to ``dagq``."""

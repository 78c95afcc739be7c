"""Commands that read definition files and submit them: validate, submit."""

from __future__ import annotations

import dataclasses
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import click

from dagq.cli.common import (
    emit_json,
    handle_errors,
    open_client,
    remote,
    settings_from,
    store_option,
)
from dagq.cli.definitions import no_cache_option, prepared, read_definition
from dagq.cli.exits import FAILED, NOT_FOUND, OK
from dagq.cli.params import param_option
from dagq.cli.render import progress_bar
from dagq.core.transforms import sequentialize_fan_in
from dagq.errors import DagqError, DefinitionError, MissingFile
from dagq.gc_pause import paused
from dagq.protocol.http import Submitted


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True,
              help='Print [{"file","valid","tasks","problems"}] on stdout; each problem is '
                   '{"message","task","field","line","column"} as the HTTP API gives it.')
def validate(files: tuple[str, ...], as_json: bool) -> None:
    """Check definition FILES offline; exit 1 if any is invalid, 5 if one is missing."""
    bad = missing = 0
    report: list[dict[str, Any]] = []
    for path in files:
        try:
            defn = read_definition(path)
        except MissingFile as exc:
            missing += 1
            report.append({"file": path, "valid": False, "tasks": None, "missing": True,
                           "problems": [{"message": "no such file"}]})
            click.echo(f"error: {exc}", err=True)
            continue
        except DefinitionError as exc:
            bad += 1
            report.append({"file": path, "valid": False, "tasks": None,
                           "problems": [p.to_json() for p in exc.problems]})
            click.echo(f"{path}: invalid", err=True)
            for p in exc.problems:
                click.echo(f"  - {p}", err=True)
            continue
        report.append({"file": path, "valid": True, "tasks": len(defn.tasks), "problems": []})
        click.echo(f"{path}: ok ({len(defn.tasks)} tasks)", err=True)
    if as_json:
        emit_json(report)
    sys.exit(FAILED if bad else NOT_FOUND if missing else OK)


@click.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--id", "workflow_id", default=None, help="Workflow id (idempotent; one file only).")
@click.option("--max-fan-in", type=click.IntRange(min=2), default=None,
              help="Restructure tasks with more dependencies than this into batches.")
@click.option("--concurrency", type=click.IntRange(min=1), default=None,
              help="Submissions in flight at once [default: 20; 1 on the embedded store, "
                   "whose single writer threads only slow down].")
@param_option
@no_cache_option
@click.option("--priority", type=click.Choice(["high", "normal", "low"]), default=None,
              help="The workflow's priority band (docs/concurrency.md); tasks that set "
                   "their own keep it.")
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
           max_fan_in: int | None, concurrency: int | None, params: tuple[str, ...],
           no_cache: bool, priority: str | None, wait_: bool, watch_: bool,
           timeout_s: float | None, as_json: bool,
           store: str | None) -> None:
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
        failed = missing = False
        for path in paths:  # validate everything first: bad input writes nothing
            try:
                defn = prepared(path, params, local=not remote(ctx), no_cache=no_cache)
                if priority is not None:
                    defn = dataclasses.replace(defn, priority=priority)
                if max_fan_in is not None:  # a definition the transform refuses is bad input too
                    sequentialize_fan_in(defn, max_fan_in)
                defs.append(defn)
            except MissingFile as exc:
                missing = True
                click.echo(f"error: {exc}", err=True)
            except DefinitionError as exc:
                failed = True
                click.echo(f"error: {exc}", err=True)
        if failed or missing:
            sys.exit(FAILED if failed else NOT_FOUND)
        client = open_client(ctx, store, create=True)
        if concurrency is None:
            concurrency = 20 if remote(ctx) or not settings_from(ctx, store).is_embedded else 1
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
        sys.exit(FAILED if errors else OK)
    sys.stdout.flush()
    from dagq.cli.follow import wait_for, watch_workflow

    if watch_:
        sys.exit(watch_workflow(client, ids[0], 1.0, timeout_s))
    sys.exit(wait_for(client, ids, timeout_s, 1.0))


COMMANDS = (validate, submit)
"""The commands this module adds to ``dagq``."""

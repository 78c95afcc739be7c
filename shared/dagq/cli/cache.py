"""``dagq plan`` and ``dagq cache list|show|clear``: the task cache before and after a run.

``plan`` says what a run of a definition would take from the cache; ``cache`` lists,
shows and clears the entries in the store (see docs/caching.md).

These read and change the store directly, so they refuse ``--api``.
"""

from __future__ import annotations

import contextlib
import shlex
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import click

from dagq.cli.common import (
    NoStore,
    check_store_exists,
    emit_json,
    handle_errors,
    refuse_remote,
    settings_from,
    store_option,
)
from dagq.cli.definitions import prepared
from dagq.cli.params import param_option
from dagq.cli.render import duration_text, print_table
from dagq.core import values
from dagq.core.validate import validate
from dagq.errors import DefinitionError, NotFound
from dagq.ops.retention import parse_age
from dagq.ports import Backend
from dagq.protocol import cache as task_cache
from dagq.views.plan import plan as plan_of
from dagq.wiring import backend_from_settings


def _backend(ctx: click.Context, store_url: str | None, what: str) -> Backend:
    """The store's backend; ``NoStore`` (exit 5) when the embedded store does not exist."""
    refuse_remote(ctx, what)
    settings = settings_from(ctx, store_url)
    check_store_exists(settings)
    return backend_from_settings(settings)


@contextlib.contextmanager
def _plan_backend(ctx: click.Context, store_url: str | None) -> Iterator[Backend]:
    """The store to plan against; an empty throw-away one when the embedded store does
    not exist yet (a plan writes nothing, so it creates no store)."""
    refuse_remote(ctx, "dagq plan", "dagq plan without --api, where DAGQ_STORE reaches "
                                    "the store")
    settings = settings_from(ctx, store_url)
    try:
        check_store_exists(settings)
    except NoStore as exc:
        click.echo(f"dagq: {exc}: nothing is cached", err=True)
        with tempfile.TemporaryDirectory(prefix="dagq-plan-") as tmp:
            backend = backend_from_settings(settings_from(ctx, f"sqlite:{tmp}/empty.db"))
            try:
                yield backend
            finally:
                backend.close()
        return
    yield backend_from_settings(settings)


def age_text(seconds: float) -> str:
    """``12s``, ``4m05s``, ``2h03m``, ``3d04h``."""
    if seconds < 86400:
        return duration_text(seconds)
    s = int(seconds)
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def _size(entry: task_cache.Entry) -> int:
    if entry.ref is not None:
        return entry.ref.size
    return 0 if entry.output is None else len(values.dumps(entry.output))


def _row(entry: task_cache.Entry, now: float) -> dict[str, Any]:
    """An entry as ``dagq cache list --json`` gives it."""
    return {"key": entry.key, "workflow": entry.workflow, "task": entry.task,
            "source": entry.source(), "workflow_id": entry.workflow_id,
            "attempt": entry.attempt, "created_at": entry.created_at,
            "age_s": round(now - entry.created_at, 3), "size": _size(entry),
            "stored": "object" if entry.ref is not None else "inline"}


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@param_option
@click.option("--json", "as_json", is_flag=True,
              help='Print [{"task","decision","reason","key","source","changed"}].')
@store_option
@click.pass_context
@handle_errors
def plan(ctx: click.Context, file: str, params: tuple[str, ...], as_json: bool,
         store: str | None) -> None:
    """Say what a run of FILE would take from the cache, before running it.

    For each task: hit (taken from the cache), miss (and which key component changed
    since its last cached result), runs (not cached, or after a task that runs),
    skipped or mapped. Reads FILE as `dagq submit` does; writes nothing."""
    defn = prepared(file, params)
    problems = validate(defn)
    if problems:
        raise DefinitionError(problems, source=file)
    with _plan_backend(ctx, store) as backend:
        steps = plan_of(backend, defn, time.time())
    if as_json:
        emit_json([s.to_json() for s in steps])
        return
    print_table(["task", "decision", "reason"], [[s.task, s.decision, s.reason] for s in steps])
    if sys.stdout.isatty():
        ran = sum(s.decision in ("miss", "runs") for s in steps)
        click.echo(f"{len(steps) - ran} of {len(steps)} task(s) would not run "
                   f"({sum(s.decision == 'hit' for s in steps)} from the cache); "
                   f"{ran} would run", err=True)


@click.group(name="cache")
def cache_() -> None:
    """List, show and clear the task cache (results reused by tasks with 'cache')."""


def _filtered(backend: Backend, task: str | None, workflow: str | None,
              older_than: float | None, now: float) -> list[task_cache.Entry]:
    return [e for e in task_cache.entries(backend)
            if (task is None or e.task == task) and (workflow is None or e.workflow == workflow)
            and (older_than is None or now - e.created_at > older_than)]


def _age(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return parse_age(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@cache_.command(name="list")
@click.option("--task", default=None, help="Only entries made by tasks of this name.")
@click.option("--workflow", default=None, metavar="NAME",
              help="Only entries made by workflows of this name.")
@click.option("--json", "as_json", is_flag=True,
              help='Print [{"key","workflow","task","source","created_at","age_s","size",'
                   '...}].')
@store_option
@click.pass_context
@handle_errors
def list_(ctx: click.Context, task: str | None, workflow: str | None, as_json: bool,
          store: str | None) -> None:
    """List cache entries, oldest first.

    Each with its key, the workflow name and task that made it, the run/task/attempt it
    came from, its age and its output's size in bytes."""
    backend = _backend(ctx, store, "dagq cache list")
    now = time.time()
    rows = [_row(e, now) for e in _filtered(backend, task, workflow, None, now)]
    if as_json:
        emit_json(rows)
        return
    print_table(["key", "workflow", "task", "source", "age", "size"],
                [[r["key"], r["workflow"], r["task"], r["source"], age_text(r["age_s"]),
                  r["size"]] for r in rows])


@cache_.command(name="show")
@click.argument("key")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@store_option
@click.pass_context
@handle_errors
def show(ctx: click.Context, key: str, as_json: bool, store: str | None) -> None:
    """Show one cache entry: components, source, age, size.

    KEY may be a unique start of a key. Exit 5 when there is no such entry."""
    backend = _backend(ctx, store, "dagq cache show")
    matches = [e for e in task_cache.entries(backend) if e.key.startswith(key)] if key else []
    if not matches:
        raise NotFound(f"no cache entry {key!r} (dagq cache list shows them)")
    if len(matches) > 1:
        raise click.UsageError(f"{key!r} starts {len(matches)} cache keys; give more of it")
    (entry,) = matches
    now = time.time()
    info = {**_row(entry, now), "digest": entry.digest, "components": entry.components}
    if entry.ref is not None:
        info["object"] = entry.ref.name
    if as_json:
        emit_json(info)
        return
    click.echo(f"{entry.key}: {entry.workflow} / {entry.task}")
    click.echo(f"  source: {entry.source()} (dagq logs {shlex.quote(entry.workflow_id)} "
               f"{shlex.quote(entry.task)} --attempt {entry.attempt})")
    click.echo(f"  age: {age_text(info['age_s'])}  size: {info['size']} bytes "
               f"({'in ' + entry.ref.name if entry.ref is not None else 'inline'})")
    click.echo("  components:")
    for name, value in entry.components.items():
        if isinstance(value, dict):
            for sub, digest in value.items():
                click.echo(f"    {name}.{sub}: {digest}")
        else:
            click.echo(f"    {name}: {value if value != '' else '-'}")


@cache_.command(name="clear")
@click.option("--task", default=None, help="Only entries made by tasks of this name.")
@click.option("--workflow", default=None, metavar="NAME",
              help="Only entries made by workflows of this name.")
@click.option("--older-than", "older_than", default=None, callback=_age, metavar="AGE",
              help="Only entries stored longer ago than this (e.g. 30d, 12h).")
@click.option("--all", "all_", is_flag=True, help="Every entry (when no filter is given).")
@click.option("--dry-run", is_flag=True, help="Only print the keys that would be removed.")
@store_option
@click.pass_context
@handle_errors
def clear(ctx: click.Context, task: str | None, workflow: str | None,
          older_than: float | None, all_: bool, dry_run: bool, store: str | None) -> None:
    """Remove cache entries matching every filter given.

    Prints one key per line; their stored outputs go with them, and the tasks run again
    next time (see docs/caching.md about runs that took a large output from an entry).
    Refuses to remove everything unless --all is given."""
    if task is None and workflow is None and older_than is None and not all_:
        raise click.UsageError("give --task, --workflow or --older-than to choose entries, "
                               "or --all to remove every one")
    backend = _backend(ctx, store, "dagq cache clear")
    gone = _filtered(backend, task, workflow, older_than, time.time())
    for entry in gone:
        if not dry_run:
            task_cache.delete(backend, entry)
        click.echo(entry.key)
    click.echo(f"{len(gone)} cache entr{'y' if len(gone) == 1 else 'ies'} "
               f"{'would be ' if dry_run else ''}removed", err=True)


COMMANDS = (plan, cache_)
"""The commands this module adds to ``dagq``."""

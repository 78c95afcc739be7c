"""What every ``dagq`` command shares: the client, error output and JSON output.

The ``--store`` option and settings, errors printed with the exit codes of
``dagq.cli.exits``, times in JSON as ISO-8601 UTC, and the piped (non-terminal) test."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from dagq.cli.exits import INTERRUPTED, code_of
from dagq.cli.workflow_api import WorkflowAPI
from dagq.client import WorkflowClient
from dagq.config import Settings
from dagq.errors import DagqError, StoreUnavailable, WorkflowNotFound
from dagq.ports import Backend
from dagq.wiring import backend_from_settings

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_STORE = "sqlite:.dagq/dagq.db"
"""The store used when neither DAGQ_STORE nor --store names one."""

TIME_KEYS = frozenset({"until", "last_seen", "not_before"})
"""Keys (besides every ``*_at``) whose numbers are times: ISO-8601 UTC in JSON output."""


class NoStore(WorkflowNotFound):
    """Raised when a command that only reads finds no embedded store file: it creates
    none (nothing was ever submitted there)."""


def store_option(f: F) -> F:
    """Add ``--store`` (overrides ``DAGQ_STORE``) to a command."""
    return click.option(
        "--store", "store", default=None, metavar="URL",
        help="Store URL (overrides DAGQ_STORE), e.g. sqlite:.dagq/dagq.db or azure://ACCOUNT/PREFIX.",
    )(f)


def settings_from(ctx: click.Context, store: str | None = None, **overrides: Any) -> Settings:
    """Settings from the environment, then the group's and the command's flags."""
    group_store = (ctx.find_root().params or {}).get("store")
    return Settings.from_env(store=store or group_store, **overrides)


def handle_errors(f: F) -> F:
    """Print dagq errors as clear messages (no traceback) and exit with their code
    (``dagq.cli.exits``); Ctrl-C exits 130."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            if args and isinstance(args[0], click.Context):
                _resolve_latest(args[0], kwargs)
            return f(*args, **kwargs)
        except DagqError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(code_of(exc))
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(INTERRUPTED)

    return wrapper  # type: ignore[return-value]


LATEST = "@latest"
"""Stands for the newest workflow (``@latest:NAME``: the newest named NAME) wherever a
command takes a workflow id."""


def _resolve_latest(ctx: click.Context, kwargs: dict[str, Any]) -> None:
    """Replace ``@latest`` / ``@latest:NAME`` in the workflow id arguments by that id."""
    for key in ("workflow_id", "workflow_ids"):
        value = kwargs.get(key)
        many = isinstance(value, tuple | list)
        ids = list(value) if many else [value]  # type: ignore[arg-type]
        if not any(isinstance(v, str) and v.split(":", 1)[0] == LATEST for v in ids):
            continue
        client = open_client(ctx, kwargs.get("store"))
        out = []
        for v in ids:
            if isinstance(v, str) and v.split(":", 1)[0] == LATEST:
                name = v.split(":", 1)[1] if ":" in v else None
                rows = client.list_workflows(limit=1, name=name)
                if not rows:
                    what = f" named {name!r}" if name else ""
                    raise WorkflowNotFound(f"{v}: there is no workflow{what} in this store yet")
                v = rows[0]["id"]
            out.append(v)
        kwargs[key] = tuple(out) if many else out[0]


def remote(ctx: click.Context) -> bool:
    """True when ``--api``/``DAGQ_API`` names an HTTP API to go through."""
    return bool((ctx.find_root().params or {}).get("api"))


def open_client(ctx: click.Context, store: str | None, *, create: bool = False) -> WorkflowAPI:
    """The HTTP client when ``--api``/``DAGQ_API`` names an API, else a client on the
    configured store. Unless ``create``, a missing embedded store file is not created
    (nor its directories): ``NoStore`` says there is none yet."""
    root = ctx.find_root().params or {}
    if remote(ctx):
        if store or root.get("store"):
            raise click.UsageError("--store and --api both name where workflows live; "
                                   "give one (unset DAGQ_API to use the store)")
        from dagq.remote.client import Client

        return Client.from_env(str(root["api"]))
    settings = settings_from(ctx, store)
    if not create:
        check_store_exists(settings)
    return WorkflowClient(backend_from_settings(settings), outbox_grace_s=settings.outbox_grace)


def check_store_exists(settings: Settings) -> None:
    """``NoStore`` when ``settings`` name an embedded store whose file does not exist."""
    if not settings.is_embedded:
        return
    from dagq.backends.sqlite.backend import sqlite_path

    path = Path(sqlite_path(settings.store))
    if path.exists():
        return
    if not path.parent.is_dir() and settings.store != DEFAULT_STORE:
        raise StoreUnavailable(f"no store at {path}: its directory {path.parent} does not "
                               f"exist (check --store / DAGQ_STORE={settings.store}; dagq "
                               "creates a store when a workflow is submitted to it)")
    raise NoStore(f"no store at {path} yet (nothing was submitted with "
                  f"DAGQ_STORE={settings.store}; --store or DAGQ_STORE name another)")


def iso_time(epoch: float) -> str:
    """``2026-12-01T10:15:00.250Z``: an epoch time as ISO-8601 UTC."""
    stamp = datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def json_ready(value: Any) -> Any:
    """``value`` with every time (a number under a ``*_at`` key or one of ``TIME_KEYS``)
    as an ISO-8601 UTC string."""
    if isinstance(value, dict):
        return {k: iso_time(v) if _is_time(k, v) else json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    return value


def _is_time(key: object, value: object) -> bool:
    return (isinstance(key, str) and (key.endswith("_at") or key in TIME_KEYS)
            and isinstance(value, int | float) and not isinstance(value, bool))


def emit_json(value: Any) -> None:
    """Print one JSON document on stdout (times as ISO-8601 UTC strings)."""
    click.echo(json.dumps(json_ready(value), indent=2, sort_keys=False, default=str))


def emit_json_line(value: Any) -> None:
    """Print one JSON document on one line (for streams: one object per line)."""
    click.echo(json.dumps(json_ready(value), default=str))
    sys.stdout.flush()


def piped() -> bool:
    """True when stdout is not a terminal: print tab-separated lines without headers."""
    return not sys.stdout.isatty()


def store_backend(ctx: click.Context, store: str | None, *, what: str) -> Backend:
    """The configured store's backend, for a command that works on the store itself;
    a usage error under ``--api`` (the HTTP API does not offer it)."""
    refuse_remote(ctx, what)
    return backend_from_settings(settings_from(ctx, store))


def refuse_remote(ctx: click.Context, what: str, instead: str = "") -> None:
    """A usage error when ``--api`` is given to a command that works on the store."""
    if remote(ctx):
        raise click.UsageError(f"{what} works on the store directly, not through --api; "
                               "run it where DAGQ_STORE reaches the store"
                               + (f" (or {instead})" if instead else ""))

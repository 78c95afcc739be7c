"""What every ``dagq`` command shares: the ``--store`` option, settings and error output."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from dagq.cli.workflow_api import WorkflowAPI
from dagq.client import WorkflowClient
from dagq.config import Settings
from dagq.errors import DagqError, DefinitionError
from dagq.ports import Backend
from dagq.wiring import backend_from_settings

F = TypeVar("F", bound=Callable[..., Any])


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
    """Print dagq errors as clear messages (no traceback) and exit 1."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except DefinitionError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)
        except DagqError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def open_client(ctx: click.Context, store: str | None) -> WorkflowAPI:
    """The HTTP client when ``--api``/``DAGQ_API`` names an API, else a client on the
    configured store."""
    root = ctx.find_root().params or {}
    api = root.get("api")
    if api:
        if store or root.get("store"):
            raise click.UsageError("--store and --api both name where workflows live; "
                                   "give one (unset DAGQ_API to use the store)")
        from dagq.remote.client import Client

        return Client.from_env(api)
    settings = settings_from(ctx, store)
    return WorkflowClient(backend_from_settings(settings), outbox_grace_s=settings.outbox_grace)


def emit_json(value: Any) -> None:
    """Print one JSON document on stdout."""
    click.echo(json.dumps(value, indent=2, sort_keys=False, default=str))


def store_backend(ctx: click.Context, store: str | None, *, what: str) -> Backend:
    """The configured store's backend, for a command that works on the store itself;
    a usage error under ``--api`` (the HTTP API does not offer it)."""
    if (ctx.find_root().params or {}).get("api"):
        raise click.UsageError(f"{what} works on the store directly, not through --api; "
                               "run it where DAGQ_STORE reaches the store")
    return backend_from_settings(settings_from(ctx, store))

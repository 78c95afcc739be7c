"""The ``dagq`` command: a short click group; commands live in sibling modules."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from dagq.config import Settings
from dagq.errors import DagqError, DefinitionError

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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--store", default=None, metavar="URL", help="Store URL (overrides DAGQ_STORE).")
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
@click.version_option(package_name="dagq")
def cli(store: str | None, verbose: int) -> None:
    """dagq: run DAG workflows of shell commands and Python functions, locally or on Azure."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        stream=sys.stderr)
    from dagq.plugins import load_kinds_from_env

    try:
        load_kinds_from_env()
    except DagqError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


def main() -> None:
    """Console-script entry point."""
    from dagq.cli import batch as _batch  # noqa: F401  (registers commands)
    from dagq.cli import files as _files  # noqa: F401
    from dagq.cli import run as _run  # noqa: F401
    from dagq.cli import schedule as _schedule  # noqa: F401
    from dagq.cli import schema as _schema  # noqa: F401
    from dagq.cli import services as _services  # noqa: F401
    from dagq.cli import workflows as _workflows  # noqa: F401

    try:
        cli.main(prog_name="dagq", standalone_mode=False)
    except click.UsageError as exc:  # bad input exits 1, like every other bad input
        exc.show()
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()

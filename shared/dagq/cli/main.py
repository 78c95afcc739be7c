"""The ``dagq`` command: a short click group; commands live in sibling modules.

Each command module lists its commands in ``COMMANDS``; this module registers them
explicitly, so no command module imports this one.
"""

from __future__ import annotations

import logging
import sys

import click

from dagq.cli import batch, deadletters, files, run, schedule, services, workflows

COMMAND_MODULES = (batch, deadletters, files, run, schedule, services, workflows)
"""Modules whose ``COMMANDS`` make up ``dagq``."""


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--store", default=None, metavar="URL", help="Store URL (overrides DAGQ_STORE).")
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
@click.version_option(package_name="dagq")
def cli(store: str | None, verbose: int) -> None:
    """dagq: run DAG workflows of shell commands and Python functions, locally or on Azure."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        stream=sys.stderr)


for _module in COMMAND_MODULES:
    for _command in _module.COMMANDS:
        cli.add_command(_command)


def main() -> None:
    """Console-script entry point."""
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

"""The ``dagq`` command: a short click group; commands live in sibling modules.

Each command module lists its commands in ``COMMANDS``. The group names them here and
imports a module only when one of its commands is used (``--help`` imports them all), so
``dagq submit`` does not load the web server, the graph renderer or the scheduler; no
command module imports this one.
"""

from __future__ import annotations

import importlib
import logging
import sys

import click

from dagq.errors import DagqError

COMMAND_MODULES: dict[str, str] = {
    "batch-feed": "batch", "deadletters": "deadletters", "explain": "explain",
    "files": "files", "wait": "follow", "watch": "follow", "graph": "graph", "logs": "logs",
    "task": "logs", "prune": "retention", "run": "run", "schedule": "schedule",
    "scheduler": "schedule", "schema": "schema", "serve": "serve",
    "coordinator": "services", "worker": "services", "doctor": "services",
    "validate": "submitting", "submit": "submitting", "status": "workflows", "list": "workflows",
    "tasks": "workflows", "output": "workflows", "cancel": "workflows", "retry": "workflows",
    "plan": "cache", "cache": "cache", "rerun": "rerun",
    "suspend": "steer", "resume": "steer", "delete": "steer",
    "trigger": "trigger",
}
"""Each ``dagq`` command and the module of ``dagq.cli`` that holds it."""


USAGE_EXIT = 2
"""Exit status of a usage error (bad flags or arguments), as click uses (the whole table
is in ``dagq.cli.exits``)."""


class DagqGroup(click.Group):
    """A group whose command list shows each command's first sentence whole."""

    group_class = type  # sub-groups (``dagq schedule``) list their commands the same way

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command, loaded or not."""
        return sorted({*self.commands, *(COMMAND_MODULES if self is cli else ())})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command, importing its module the first time."""
        if cmd_name not in self.commands and self is cli and cmd_name in COMMAND_MODULES:
            module = importlib.import_module(f"dagq.cli.{COMMAND_MODULES[cmd_name]}")
            for command in module.COMMANDS:
                self.add_command(command)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Like click's, but without cutting a summary at the terminal width."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=200)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=DagqGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--store", default=None, metavar="URL", help="Store URL (overrides DAGQ_STORE).")
@click.option("--api", default=None, envvar="DAGQ_API", metavar="URL",
              help="Go through this dagq HTTP API instead of the store [DAGQ_API]; "
                   "credentials from DAGQ_API_KEY, DAGQ_API_TOKEN or DAGQ_API_SCOPE.")
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
@click.version_option(package_name="dagq")
def cli(store: str | None, api: str | None, verbose: int) -> None:
    """dagq: run DAG workflows of shell commands and Python functions, locally or on Azure."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        stream=sys.stderr)
    if verbose < 2:  # the Azure SDK logs every request's headers at INFO: only with -vv
        logging.getLogger("azure").setLevel(logging.WARNING)
    from dagq.plugins import load_kinds_from_env

    try:
        load_kinds_from_env()
    except DagqError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


def main() -> None:
    """Console-script entry point."""
    try:
        cli.main(prog_name="dagq", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # `dagq` alone: help, success
        click.echo(exc.ctx.get_help() if exc.ctx else cli.get_help(click.Context(cli)))
        sys.exit(0)
    except click.UsageError as exc:  # bad flags or arguments: exit 2 (bad data exits 1)
        exc.show()
        sys.exit(USAGE_EXIT)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort as exc:  # Ctrl-C (click turns KeyboardInterrupt into Abort)
        interrupted = isinstance(exc.__cause__, KeyboardInterrupt)
        click.echo("interrupted" if interrupted else "aborted", err=True)
        sys.exit(130 if interrupted else 1)


if __name__ == "__main__":
    main()

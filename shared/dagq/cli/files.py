"""``dagq files``: list or download the directory a task synced with ``bg_dirsync_to``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from dagq.cli.common import handle_errors, open_client, store_option
from dagq.cli.render import print_table
from dagq.core.paths import dir_prefix


@click.command()
@click.argument("workflow_id", metavar="ID")
@click.argument("task")
@click.option("--get", "dest", type=click.Path(file_okay=False, path_type=Path), default=None,
              metavar="DEST", help="Download the files into directory DEST (MD5-checked).")
@click.option("--json", "as_json", is_flag=True, help="List as JSON: [{path, size, md5}].")
@store_option
@click.pass_context
@handle_errors
def files(ctx: click.Context, workflow_id: str, task: str, dest: Path | None, as_json: bool,
          store: str | None) -> None:
    """List the files TASK of workflow ID synced (kwargs.bg_dirsync_to), or fetch them.

    TASK is the task's name, or the ``dest`` name its sync spec gave.
    """
    client = open_client(ctx, store)
    if dest is not None:
        written = client.download_files(workflow_id, task, dest)
        click.echo(f"{len(written)} file(s) from {dir_prefix(workflow_id, task)} "
                   f"written to {dest}", err=True)
        return
    entries = client.files(workflow_id, task)
    if as_json:
        click.echo(json.dumps(entries))
    elif entries:
        print_table(["path", "size", "md5"], [[e["path"], e["size"], e["md5"]] for e in entries])
    else:
        click.echo(f"no synced files under {dir_prefix(workflow_id, task)}", err=True)


COMMANDS = (files,)
"""The commands this module adds to ``dagq``."""

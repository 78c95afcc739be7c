"""``dagq schema``: print or write the definition JSON Schema."""

from __future__ import annotations

from pathlib import Path

import click

from dagq.cli.common import handle_errors
from dagq.core.schema.generate import SCHEMA_ID, schema_text
from dagq.plugins import load_kinds


@click.command()
@click.option("--write", "dest", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="Write the schema to FILE instead of printing it.")
@click.option("--kinds", "kinds", multiple=True, metavar="MODULE:NAME",
              help="Also describe these custom task kinds (repeatable; see DAGQ_TASK_KINDS).")
@handle_errors
def schema(dest: Path | None, kinds: tuple[str, ...]) -> None:
    """Print the JSON Schema of workflow definitions (for editors and CI checks).

    Point an editor at it with ``# yaml-language-server: $schema=FILE`` at the top of
    a YAML definition, or ``"$schema": "FILE"`` in a JSON one.
    """
    load_kinds(kinds, what="--kinds")
    text = schema_text()
    if dest is None:
        click.echo(text, nl=False)
        return
    dest.write_text(text, encoding="utf-8")
    click.echo(f"wrote {dest} ({SCHEMA_ID})", err=True)


COMMANDS = (schema,)
"""The commands this module adds to ``dagq``."""

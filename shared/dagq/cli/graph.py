"""``dagq graph FILE|ID``: the DAG as Mermaid, Graphviz DOT or SVG (statuses as colours
when given a workflow id)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from dagq.cli.common import handle_errors, open_client, store_option
from dagq.cli.definitions import read_definition
from dagq.graph.model import from_definition
from dagq.graph.render import FORMATS, render

FILE_SUFFIXES = (".yaml", ".yml", ".json")
"""Endings that make a ``graph`` source a file name, never a workflow id."""


def looks_like_file(source: str) -> bool:
    """True for a path (a ``/``) or a name ending like a definition file."""
    return "/" in source or source.lower().endswith(FILE_SUFFIXES)


@click.command()
@click.argument("source", metavar="FILE|ID")
@click.option("--format", "fmt", type=click.Choice((*FORMATS, "json")), default="mermaid",
              show_default=True, help="Picture format (json: the graph model).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the graph model (same as --format json).")
@click.option("--max-width", type=click.IntRange(min=2), default=None,
              help="Fold layers with more tasks than this into one group box (default: "
                   "25 for SVG and for any graph of more than 1,000 tasks; else none).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write to this file instead of stdout.")
@store_option
@click.pass_context
@handle_errors
def graph(ctx: click.Context, source: str, fmt: str, as_json: bool, max_width: int | None,
          output: str | None, store: str | None) -> None:
    """Draw a definition FILE, or a workflow ID coloured by task status.

    SOURCE is read as a file when such a file exists, else as a workflow id; one that
    looks like a file (a path or a .yaml/.yml/.json name) must exist."""
    if Path(source).is_file() or looks_like_file(source):
        model = from_definition(read_definition(source))
    else:
        model = open_client(ctx, store).graph(source)
    picture = (json.dumps(model, indent=2) + "\n" if fmt == "json" or as_json
               else render(model, fmt, max_width))
    if output:
        Path(output).write_text(picture)
    else:
        click.echo(picture, nl=False)


COMMANDS = (graph,)
"""The commands this module adds to ``dagq``."""

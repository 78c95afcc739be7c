"""``dagq explain ID [TASK]``: why tasks are where they are (see ``dagq.core.explain``)."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from dagq.cli.common import emit_json, handle_errors, open_client, store_option
from dagq.cli.render import STATUS_COLOURS

QUIET = frozenset({"completed"})
"""Statuses listed only with ``--all`` (or when a task is named)."""


def print_explanations(rows: list[dict[str, Any]], show_all: bool) -> None:
    """One block per task: name, status and phase, then one line per reason."""
    out = Console()
    quiet = 0
    for r in rows:
        if not show_all and r["status"] in QUIET:
            quiet += 1
            continue
        phase = r["phase"]
        colour = STATUS_COLOURS.get(phase, STATUS_COLOURS.get(r["status"], "white"))
        label = r["status"] if phase == r["status"] else f"{r['status']}, {phase}"
        out.print(f"[bold]{escape(r['task'])}[/] [{colour}]{label}[/]  "
                  f"attempt {r['attempt']}  queue {escape(r['queue'])}", soft_wrap=True)
        for reason in r["reasons"]:
            out.print(f"  - {escape(reason)}", soft_wrap=True, highlight=False)
    if quiet:
        out.print(f"({quiet} completed task(s) not shown; --all lists them)")


@click.command()
@click.argument("workflow_id")
@click.argument("task", required=False)
@click.option("--all", "show_all", is_flag=True, help="Also list completed tasks.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@store_option
@click.pass_context
@handle_errors
def explain(ctx: click.Context, workflow_id: str, task: str | None, show_all: bool,
            as_json: bool, store: str | None) -> None:
    """Say why each task is where it is (dependencies, condition, back-off, workers...)."""
    rows = open_client(ctx, store).explain(workflow_id, task)
    if as_json:
        emit_json(rows)
        return
    print_explanations(rows, show_all or task is not None)


COMMANDS = (explain,)
"""The commands this module adds to ``dagq``."""

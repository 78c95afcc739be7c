"""``dagq deadletters``: list, redrive or fail the dead-lettered messages that stall
workflows (the logic is ``dagq.ops.deadletters``)."""

from __future__ import annotations

import click

from dagq.cli.common import handle_errors, settings_from, store_option
from dagq.ops.deadletters import fail_attempt, redrive, stalled
from dagq.wiring import backend_from_settings


@click.group()
def deadletters() -> None:
    """Dead-lettered messages that stall workflows: list, redrive or fail them."""


def _each(ctx: click.Context, store: str | None, action: str) -> None:
    backend = backend_from_settings(settings_from(ctx, store))
    items = stalled(backend)
    for item in items:
        if action == "fail":
            fail_attempt(backend, item)
        elif action == "redrive":
            redrive(backend, item)
        click.echo(f"{action if action != 'list' else 'stalled'} {item.key} "
                   f"(dead-lettered on {item.queue!r}: {item.reason})")
    click.echo(f"{len(items)} stalled attempt(s)", err=True)


ACTIONS = {
    "list": "List dead-lettered messages whose attempt is still running.",
    "redrive": "Send each stalling dead-lettered message again (after fixing its cause).",
    "fail": "Fail each attempt that a dead-lettered message stalls, so its workflow moves on.",
}


def _command(action: str, doc: str) -> None:
    @store_option
    @click.pass_context
    @handle_errors
    def command(ctx: click.Context, store: str | None) -> None:
        _each(ctx, store, action)

    deadletters.command(action, help=doc)(command)


for _action, _doc in ACTIONS.items():
    _command(_action, _doc)


COMMANDS = (deadletters,)
"""The commands this module adds to ``dagq``."""

"""``dagq watch`` and ``dagq wait``: follow workflows submitted by anyone until they end.

Both only call ``WorkflowClient`` methods (``summary``, ``tasks``, ``explain``), so they
work the same on a local store and over HTTP. Exit codes (also of ``submit --wait`` /
``--watch``) are ``dagq.cli.exits.OUTCOMES``: 0 completed, 1 failed, 3 cancelled, 4 timed
out, 5 no such workflow, 130 Ctrl-C. After a few seconds without an end they say on
stderr what blocks it (``dagq.cli.hints``: a queue no worker serves, no coordinator).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import click
from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from dagq.cli.common import emit_json, handle_errors, open_client, store_option
from dagq.cli.exits import INTERRUPTED, OUTCOMES, outcome_code
from dagq.cli.hints import Hinter
from dagq.cli.render import (
    STATUS_COLOURS,
    counts_text,
    duration_text,
    shorten,
    shown_counts,
    shown_status,
    took_text,
)
from dagq.cli.workflow_api import WorkflowAPI
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES
from dagq.errors import WorkflowNotFound

EXIT_CODES = OUTCOMES
"""Exit code per outcome (2 is click's usage error; the table is ``dagq.cli.exits``)."""

MAX_DEPTH = 3
"""Levels of child workflows the watch view nests."""


def wait_for(client: WorkflowAPI, ids: Sequence[str], timeout_s: float | None,
             interval_s: float, *, as_json: bool = False) -> int:
    """Poll until every workflow in ``ids`` ended or ``timeout_s`` passed; the exit code.
    Says once on stderr what blocks a workflow that does not move (``Hinter``); with
    ``as_json`` prints each workflow's summary at the end."""
    try:
        pending = {wf: str(client.summary(wf)["status"]) for wf in ids}
    except WorkflowNotFound as exc:
        click.echo(f"error: {exc}", err=True)
        if as_json:
            emit_json([{"id": wf, "status": "not_found"} for wf in ids])
        return EXIT_CODES["not_found"]
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    final: dict[str, dict[str, Any]] = {}
    hinter = Hinter(client)
    code: int | None = None
    try:
        while code is None:
            for wf in list(pending):
                row = client.summary(wf)
                if str(row["status"]) in TERMINAL_WORKFLOW_STATUSES:
                    final[wf] = row
                    del pending[wf]
                else:
                    pending[wf] = str(row["status"])
            if not pending:
                code = outcome_code(str(r["status"]) for r in final.values())
                break
            if deadline is not None and time.monotonic() >= deadline:
                for wf, status in pending.items():
                    click.echo(f"timed out after {timeout_s:g}s: {wf} is {status}", err=True)
                code = EXIT_CODES["timeout"]
                break
            hinter.check(list(pending))
            wait = interval_s if deadline is None else min(interval_s,
                                                           max(deadline - time.monotonic(), 0))
            time.sleep(wait)
    except KeyboardInterrupt:
        click.echo("stopped waiting (the workflows go on; dagq cancel stops them)", err=True)
        code = INTERRUPTED
    if as_json:
        emit_json([final.get(wf) or client.summary(wf) for wf in ids])
    return code


def watch_workflow(client: WorkflowAPI, wf_id: str, interval_s: float,
                   timeout_s: float | None = None) -> int:
    """Show ``wf_id`` live until it ends (Ctrl-C stops watching, not the run)."""
    err = Console(stderr=True)
    interactive = err.is_terminal
    live = Live(console=err, refresh_per_second=4, transient=False) if interactive else None
    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    last_line = ""
    hinter = Hinter(client, say=lambda text: err.print(f"dagq: {text}", highlight=False,
                                                        soft_wrap=True, markup=False))
    if live is not None:
        live.start()
    try:
        while True:
            summary = client.summary(wf_id)
            view, line = frame(client, summary, interactive)
            if live is not None:
                live.update(view)
            elif line != last_line:
                err.print(line, highlight=False, soft_wrap=True)
                last_line = line
            status = str(summary["status"])
            if status in TERMINAL_WORKFLOW_STATUSES:
                return EXIT_CODES[status]
            hinter.check([wf_id])
            if stop.wait(interval_s):
                err.print(f"stopped watching; {wf_id} is {status}")
                return INTERRUPTED
            if deadline is not None and time.monotonic() >= deadline:
                err.print(f"timed out after {timeout_s:g}s: {wf_id} is {status}")
                return EXIT_CODES["timeout"]
    finally:
        signal.signal(signal.SIGINT, previous)
        if live is not None:
            live.stop()


def frame(client: WorkflowAPI, summary: dict[str, Any],
          interactive: bool) -> tuple[Group, str]:
    """The live view of one workflow (children nested) and its one-line form."""
    now = time.time()
    lines: list[Text] = []
    _add_workflow(client, summary, now, 0, lines, limit=_rows_limit() if interactive else 40)
    counts = "  ".join(f"{k}={v}" for k, v in sorted(summary["counts"].items()) if v)
    return Group(*lines), f"{summary['id']} {summary['status']}: {counts}"


def _rows_limit() -> int:
    import shutil

    return max(10, shutil.get_terminal_size((100, 40)).lines - 4)


def _add_workflow(client: WorkflowAPI, summary: dict[str, Any], now: float, depth: int,
                  out: list[Text], limit: int) -> None:
    pad = "  " * depth
    colour = STATUS_COLOURS.get(str(summary["status"]), "white")
    elapsed = duration_text(float(summary.get("updated_at") or now)
                            - float(summary.get("created_at") or now)
                            if summary["status"] in TERMINAL_WORKFLOW_STATUSES
                            else now - float(summary.get("created_at") or now))
    try:
        tasks = client.tasks(str(summary["id"]))
    except WorkflowNotFound:
        tasks = []
    out.append(Text.from_markup(
        f"{pad}[bold]{summary['name']}[/] {summary['id']}  [{colour}]{summary['status']}[/]"
        f"  {elapsed}  {counts_text(shown_counts(tasks) if tasks else summary['counts'])}"))
    # the interesting rows first: active, then failed, then the rest
    order = {"running": 0, "queued": 1, "waiting": 2, "ready": 3, "failed": 4,
             "upstream_failed": 5, "cancelled": 6, "pending": 7, "skipped": 8, "completed": 9}
    shown = sorted(tasks, key=lambda t: order.get(shown_status(t), 9))
    hidden = max(0, len(shown) - limit)
    for t in shown[:limit]:
        status = shown_status(t)
        took = took_text(t, now)
        detail = shorten(t.get("error_line") or t.get("reason") or t.get("note"), 60)
        out.append(Text.from_markup(
            f"{pad}  [{STATUS_COLOURS.get(status, 'white')}]{status:<15}[/] "
            f"{t['name']}  attempt {t['attempt']}  {took}  ", overflow="fold").append(detail))
        child = t.get("child")
        if child and depth + 1 < MAX_DEPTH:
            try:
                _add_workflow(client, client.summary(str(child)), now, depth + 2, out,
                              max(5, limit // 4))
            except WorkflowNotFound:
                out.append(Text(f"{pad}    child {child} not submitted yet"))
    if hidden:
        out.append(Text(f"{pad}  … {hidden} more task(s)"))


@click.command()
@click.argument("ids", nargs=-1, required=True)
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0), default=None,
              help="Give up after this many seconds (exit 4).")
@click.option("--interval", type=click.FloatRange(min=0.05), default=1.0, show_default=True,
              help="Seconds between polls.")
@click.option("--json", "as_json", is_flag=True,
              help="At the end print each workflow's summary (a JSON array, in the order "
                   "given).")
@store_option
@click.pass_context
@handle_errors
def wait(ctx: click.Context, ids: tuple[str, ...], timeout_s: float | None, interval: float,
         as_json: bool, store: str | None) -> None:
    """Wait for workflows to end; exit 0 completed, 1 failed, 3 cancelled, 4 timed out,
    5 not found, 130 Ctrl-C. Says on stderr what blocks a workflow that does not move."""

    sys.exit(wait_for(open_client(ctx, store), ids, timeout_s, interval, as_json=as_json))


@click.command()
@click.argument("workflow_id")
@click.option("--interval", type=click.FloatRange(min=0.05), default=1.0, show_default=True,
              help="Seconds between refreshes.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0), default=None,
              help="Stop watching after this many seconds (exit 4).")
@store_option
@click.pass_context
@handle_errors
def watch(ctx: click.Context, workflow_id: str, interval: float, timeout_s: float | None,
          store: str | None) -> None:
    """Follow a workflow live until it ends; exits with the codes of `dagq wait`."""

    try:
        code = watch_workflow(open_client(ctx, store), workflow_id, interval, timeout_s)
    except WorkflowNotFound as exc:
        click.echo(f"error: {exc}", err=True)
        code = EXIT_CODES["not_found"]
    sys.exit(code)


COMMANDS = (wait, watch)
"""The commands this module adds to ``dagq``."""

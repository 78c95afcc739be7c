"""``dagq run``: submit a workflow and run a coordinator plus workers until it ends."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import click
from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from dagq.cli.common import handle_errors, refuse_remote, settings_from, store_option
from dagq.cli.definitions import no_cache_option, prepared
from dagq.cli.exits import INTERRUPTED, OUTCOMES
from dagq.cli.hints import Hinter
from dagq.cli.logs import failure_lines
from dagq.cli.params import param_option
from dagq.cli.render import STATUS_COLOURS
from dagq.client import WorkflowClient
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES
from dagq.errors import DagqError, WorkflowFinished
from dagq.plugins import processor_kinds
from dagq.runtime.local import LocalRuntime, queues_of
from dagq.wiring import backend_from_settings
from dagq.worker import proctree
from dagq.worker.process import kill_all_now

KILL_WAIT_S = 2.0
"""After a second Ctrl-C, how long ``dagq run`` waits for the workflow to end."""
INTERRUPTED_CLOSE_S = 0.5
"""After Ctrl-C, how long ``dagq run`` waits for its threads once the workflow ended."""


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--id", "workflow_id", default=None, help="Workflow id (idempotent).")
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True,
              help="Worker slots per queue.")
@click.option("--processor", "processors", multiple=True, metavar="MODULE:CLASS",
              help="Custom processor tried before the built-in ones (repeatable).")
@click.option("--json", "as_json", is_flag=True,
              help='At the end print {"id","status","counts","elapsed_s"} (and no id first).')
@param_option
@no_cache_option
@store_option
@click.pass_context
@handle_errors
def run(ctx: click.Context, file: str, workflow_id: str | None, workers: int,
        processors: tuple[str, ...], params: tuple[str, ...], no_cache: bool, as_json: bool,
        store: str | None) -> None:
    """Run FILE to the end with live progress; exit 0 if it completed, 1 if it failed, 3
    if it was cancelled. Ctrl-C cancels it (exit 130); a second Ctrl-C kills its tasks."""
    refuse_remote(ctx, "dagq run", "dagq --api URL submit FILE --watch")
    settings = settings_from(ctx, store)
    processor_kinds(processors)  # their task kinds, before the definition is validated
    defn = prepared(file, params, no_cache=no_cache)
    backend = backend_from_settings(settings)
    client = WorkflowClient(backend)
    runtime = LocalRuntime(backend, settings, queues_of(defn), workers,
                           children=WorkflowClient(backend), processors=processors)
    wf_id = client.submit(defn, workflow_id=workflow_id).id
    runtime.only([wf_id])  # its workers run this workflow's tasks, no one else's
    if not as_json:
        click.echo(wf_id)
    presses: list[float] = []

    def on_sigint(*_: object) -> None:
        presses.append(time.monotonic())
        if len(presses) == 2:  # the second Ctrl-C: no more grace for anything
            n = kill_all_now()
            Console(stderr=True).print(f"[red]killed {n} task process tree(s)")

    proctree.enable_subreaper()
    previous = signal.signal(signal.SIGINT, on_sigint)
    runtime.start()
    started = time.monotonic()
    try:
        final = _watch(client, runtime, wf_id, started, presses)
    finally:
        signal.signal(signal.SIGINT, previous)
        runtime.close(INTERRUPTED_CLOSE_S if presses else 10.0)
    colour = STATUS_COLOURS.get(final["status"], "white")
    Console(stderr=True).print(
        f"workflow {wf_id} [{colour}]{final['status']}[/] in {time.monotonic() - started:.1f}s: "
        + "  ".join(f"{k}={v}" for k, v in sorted(final["counts"].items()) if v),
        soft_wrap=True)
    if final["status"] != "completed":
        lines = failure_lines(client, wf_id)
        if lines:
            Console(stderr=True).print("failed tasks:\n" + "\n".join(lines),
                                       soft_wrap=True, highlight=False, markup=False)
    if as_json:
        click.echo(json.dumps({"id": wf_id, "status": final["status"], "counts": final["counts"],
                               "elapsed_s": round(time.monotonic() - started, 3)}, indent=2))
    if presses:
        sys.exit(INTERRUPTED)
    sys.exit(OUTCOMES.get(str(final["status"]), OUTCOMES["failed"]))


def _watch(client: WorkflowClient, runtime: LocalRuntime, wf_id: str, started: float,
           presses: list[float]) -> dict[str, Any]:
    cancelled = False
    err = Console(stderr=True)
    frames = _frames(client, wf_id, started)
    live = Live(console=err, refresh_per_second=8, transient=True) if err.is_terminal else None
    last_line, last_print = "", 0.0
    hinter = Hinter(client, say=lambda text: err.print(f"dagq: {text}", highlight=False,
                                                        soft_wrap=True, markup=False))
    if live is not None:
        live.start()
    try:
        while True:
            if presses and not cancelled:
                cancelled = True
                err.print("[yellow]cancelling: stopping the running tasks "
                          "(Ctrl-C again kills them at once)")
                threading.Thread(target=_cancel, args=(client, runtime, wf_id),
                                 daemon=True).start()
            summary, view, line = next(frames)
            if live is not None:
                live.update(view)
            elif line != last_line and time.monotonic() - last_print >= 1.0:
                err.print(line, highlight=False, soft_wrap=True)
                last_line, last_print = line, time.monotonic()
            if summary["status"] in TERMINAL_WORKFLOW_STATUSES:
                return summary
            if len(presses) >= 2 and time.monotonic() - presses[1] > KILL_WAIT_S:
                return summary  # killed: do not wait for the bookkeeping any longer
            if not presses:
                hinter.check([wf_id])
            time.sleep(0.1)
    finally:
        if live is not None:
            live.stop()


def _cancel(client: WorkflowClient, runtime: LocalRuntime, wf_id: str) -> None:
    """Cancel in the state first (so the stopped tasks end ``cancelled``, not failed),
    then stop the local tasks at once instead of at the workers' next poll."""
    try:
        client.cancel(wf_id, on_written=lambda: runtime.stop_workflow(wf_id))
    except WorkflowFinished:
        pass  # it ended meanwhile
    except DagqError as exc:
        Console(stderr=True).print(f"[red]cancel failed: {exc}; press Ctrl-C again to kill")


def _frames(client: WorkflowClient, wf_id: str,
            started: float) -> Iterator[tuple[dict[str, Any], Group, str]]:
    while True:
        state = client.state(wf_id)  # the source of truth (index counts lag up to 1 s)
        summary: dict[str, Any] = {"name": state.definition.name, "status": state.status,
                                   "counts": state.counts()}
        running = [name for name, _ in state.running()]
        elapsed = time.monotonic() - started
        counts = "  ".join(f"{k}={v}" for k, v in sorted(summary["counts"].items()) if v)
        head = Text.from_markup(
            f"[bold]{summary['name']}[/] {wf_id}  "
            f"[{STATUS_COLOURS.get(summary['status'], 'white')}]{summary['status']}[/]  "
            f"{elapsed:.1f}s  {counts}")
        shown = ", ".join(running[:8]) + (f" (+{len(running) - 8})" if len(running) > 8 else "")
        body = Text(f"running: {shown}" if running else "running: -", style="cyan")
        line = f"[{elapsed:6.1f}s] {summary['status']}: {counts}" + (
            f" | running: {shown}" if running else "")
        yield summary, Group(head, body), line


COMMANDS = (run,)
"""The commands this module adds to ``dagq``."""

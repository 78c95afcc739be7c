"""``dagq run``: submit a workflow and run a coordinator plus workers until it ends."""

from __future__ import annotations

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

from dagq.backends.wiring import backend_from_settings
from dagq.cli.main import cli, handle_errors, settings_from, store_option
from dagq.cli.params import param_option, with_params
from dagq.cli.render import STATUS_COLOURS
from dagq.client import WorkflowClient
from dagq.compose.loader import load_file
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES, WorkflowDef
from dagq.plugins import processor_kinds
from dagq.ports import Backend
from dagq.runtime.coordinator import Coordinator
from dagq.worker.processors import default_processors, load_processor
from dagq.worker.runtime import Worker


def queues_of(defn: WorkflowDef) -> set[str]:
    """Every queue a workflow (and its inline child workflows) dispatches to."""
    out: set[str] = set()
    for t in defn.tasks:
        if t.merge:
            continue
        if t.workflow is not None:
            if t.workflow.definition is not None:
                out |= queues_of(t.workflow.definition)
            continue
        out.add(defn.queue_of(t))
    return out


class LocalRuntime:
    """A coordinator and one worker pool per queue, in threads of this process."""

    def __init__(self, backend: Backend, settings: Any, queues: set[str], workers: int,
                 processors: tuple[str, ...] = ()) -> None:
        self.stop = threading.Event()
        self.coordinator = Coordinator(backend, settings)
        self.workers = [
            Worker(backend, settings, q, concurrency=workers,
                   processors=[load_processor(p) for p in processors] + default_processors())
            for q in sorted(queues)]
        self.threads = [threading.Thread(target=self.coordinator.run, args=(self.stop,),
                                         name="dagq-coordinator", daemon=True)]
        self.threads += [threading.Thread(target=w.run, kwargs={"install_signals": False},
                                          name=f"dagq-worker-{w.queue_name}", daemon=True)
                         for w in self.workers]

    def start(self) -> None:
        """Start every thread."""
        for t in self.threads:
            t.start()

    def close(self) -> None:
        """Stop workers (releasing what they run) and the coordinator."""
        for w in self.workers:
            w.shutdown()
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)
        self.coordinator.close()


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--id", "workflow_id", default=None, help="Workflow id (idempotent).")
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True,
              help="Worker slots per queue.")
@click.option("--processor", "processors", multiple=True, metavar="MODULE:CLASS",
              help="Custom processor tried before the built-in ones (repeatable).")
@param_option
@store_option
@click.pass_context
@handle_errors
def run(ctx: click.Context, file: str, workflow_id: str | None, workers: int,
        processors: tuple[str, ...], params: tuple[str, ...], store: str | None) -> None:
    """Run FILE to the end with live progress; exit 0 if it completed. Ctrl-C cancels it."""
    settings = settings_from(ctx, store)
    processor_kinds(processors)  # their task kinds, before the definition is validated
    defn = with_params(load_file(file), params)
    backend = backend_from_settings(settings)
    client = WorkflowClient(backend)
    runtime = LocalRuntime(backend, settings, queues_of(defn), workers, processors)
    wf_id = client.submit(defn, workflow_id=workflow_id).id
    click.echo(wf_id)
    interrupted = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: interrupted.set())
    runtime.start()
    started = time.monotonic()
    try:
        final = _watch(client, wf_id, started, interrupted)
    finally:
        signal.signal(signal.SIGINT, previous)
        runtime.close()
    colour = STATUS_COLOURS.get(final["status"], "white")
    Console(stderr=True).print(
        f"workflow {wf_id} [{colour}]{final['status']}[/] in {time.monotonic() - started:.1f}s: "
        + "  ".join(f"{k}={v}" for k, v in sorted(final["counts"].items()) if v),
        soft_wrap=True)
    sys.exit(0 if final["status"] == "completed" else 1)


def _watch(client: WorkflowClient, wf_id: str, started: float,
           interrupted: threading.Event) -> dict[str, Any]:
    cancelled = False
    err = Console(stderr=True)
    frames = _frames(client, wf_id, started)
    live = Live(console=err, refresh_per_second=8, transient=True) if err.is_terminal else None
    last_line, last_print = "", 0.0
    if live is not None:
        live.start()
    try:
        while True:
            if interrupted.is_set() and not cancelled:
                cancelled = True
                err.print("[yellow]cancelling (Ctrl-C again is ignored; waiting for tasks to stop)")
                client.cancel(wf_id)
            summary, view, line = next(frames)
            if live is not None:
                live.update(view)
            elif line != last_line and time.monotonic() - last_print >= 1.0:
                err.print(line, highlight=False, soft_wrap=True)
                last_line, last_print = line, time.monotonic()
            if summary["status"] in TERMINAL_WORKFLOW_STATUSES:
                return summary
            time.sleep(0.1)
    finally:
        if live is not None:
            live.stop()


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

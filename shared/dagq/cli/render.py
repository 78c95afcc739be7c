"""Human output: tables, status views and progress (on stderr when stdout is not a terminal)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table

STATUS_COLOURS = {
    "completed": "green", "running": "cyan", "ready": "blue", "pending": "white",
    "failed": "red", "upstream_failed": "magenta", "skipped": "yellow", "cancelled": "bright_black",
}


def console() -> Console:
    """Stdout when it is a terminal, else stderr (keeps stdout clean for pipes)."""
    return Console() if sys.stdout.isatty() else Console(stderr=True)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A simple table."""
    table = Table(*headers, box=None, pad_edge=False)
    for row in rows:
        table.add_row(*(_cell(h, v) for h, v in zip(headers, row, strict=False)))
    Console().print(table)


def _cell(header: str, value: Any) -> str:
    text = "" if value is None else str(value)
    if header == "status" and text in STATUS_COLOURS:
        return f"[{STATUS_COLOURS[text]}]{text}[/]"
    return text.replace("[", r"\[")


def counts_text(counts: dict[str, int]) -> str:
    """``completed=3 running=1`` with colours."""
    return "  ".join(f"[{STATUS_COLOURS.get(k, 'white')}]{k}={v}[/]"
                     for k, v in sorted(counts.items()) if v)


def print_status(summary: dict[str, Any], tasks: list[dict[str, Any]]) -> None:
    """Workflow header, counts and a task table."""
    out = Console()
    colour = STATUS_COLOURS.get(summary["status"], "white")
    out.print(f"[bold]{summary['id']}[/]  {summary['name']}  [{colour}]{summary['status']}[/]")
    out.print(counts_text(summary["counts"]))
    if summary.get("parent_id"):
        out.print(f"child of {summary['parent_id']} (task {summary['parent_task']})")
    children = summary.get("children") or []
    if children:
        out.print("child workflows:")
        root_depth = summary["id"].count("~")
        for c in children:
            indent = "  " * (c["id"].count("~") // 2 - root_depth // 2)
            ccol = STATUS_COLOURS.get(c["status"], "white")
            out.print(f"{indent}└─ {c['id']} (task {c.get('parent_task')}) "
                      f"[{ccol}]{c['status']}[/] {counts_text(c['counts'])}", soft_wrap=True)
    now = time.time()
    print_table(["name", "status", "queue", "attempt", "detail"], [
        [t["name"], t["status"], t["queue"], t["attempt"],
         due_text(t.get("due_at"), now)
         or ((t.get("error") or t.get("note") or "").splitlines() or [""])[0][:70]]
        for t in tasks])


def due_text(due_at: float | None, now: float) -> str:
    """``delayed: due at 2026-12-01T10:00:00Z (in 42s)`` for an attempt still waiting
    out its delay, else ``""``."""
    if due_at is None or due_at <= now:
        return ""
    when = datetime.fromtimestamp(due_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"delayed: due at {when} (in {due_at - now:.0f}s)"


@contextmanager
def progress_bar(total: int, label: str) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr when interactive; yields ``advance()``."""
    if total <= 1 or not sys.stderr.isatty():
        yield lambda: None
        return
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(label, total=total)
        yield lambda: progress.advance(task)

"""Human output: tables, status views and progress (on stderr when stdout is not a terminal)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dagq.views.task_rows import TaskPage

if TYPE_CHECKING:  # rich is imported where it draws: most commands print plain lines
    from rich.console import Console

STATUS_COLOURS = {
    "completed": "green", "running": "cyan", "ready": "blue", "pending": "white",
    "failed": "red", "upstream_failed": "magenta", "skipped": "yellow", "cancelled": "bright_black",
    "queued": "bright_cyan", "waiting": "purple",
}


def console() -> Console:
    """Stdout when it is a terminal, else stderr (keeps stdout clean for pipes)."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(stderr=True)


FULL_COLUMNS = frozenset({"id", "name", "workflow", "worker", "queue"})
"""Columns never shortened on a terminal (ids must stay copyable)."""


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A table on a terminal; plain tab-separated rows, no header and nothing shortened
    when stdout is not a terminal (``dagq list | cut -f1`` gives whole ids)."""
    if not sys.stdout.isatty():
        print_lines(rows)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for i, h in enumerate(headers):
        widest = max((len(_plain(r[i])) for r in rows if i < len(r)), default=0)
        full = h in FULL_COLUMNS
        table.add_column(h, no_wrap=full, min_width=max(widest, len(h)) if full else None,
                         overflow="fold")
    for row in rows:
        table.add_row(*(_cell(h, v) for h, v in zip(headers, row, strict=False)))
    Console().print(table)


def print_lines(rows: Sequence[Sequence[Any]]) -> None:
    """Rows as tab-separated lines on stdout: no header, nothing shortened."""
    for row in rows:
        sys.stdout.write("\t".join(_plain(v) for v in row) + "\n")
    sys.stdout.flush()


def _plain(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("\t", " ").replace("\r", " ").replace("\n", " ")


def shorten(text: str | None, width: int = 100) -> str:
    """The first line of ``text``, cut at a word boundary to ``width`` characters."""
    line = ((text or "").strip().splitlines() or [""])[0]
    if len(line) <= width:
        return line
    cut = line[:width - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > width // 2 else cut).rstrip() + "…"


def duration_text(seconds: float | None) -> str:
    """``0.4s``, ``12s``, ``4m05s``, ``2h03m`` (empty for ``None``)."""
    if seconds is None:
        return ""
    if seconds < 10:
        return f"{max(seconds, 0):.1f}s"
    s = int(seconds)
    if s < 3600:
        return f"{s}s" if s < 60 else f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def time_text(epoch: float | None, now: float) -> str:
    """Local ``HH:MM:SS`` for today, ``YYYY-MM-DD HH:MM`` otherwise (empty for ``None``);
    ISO-8601 UTC when stdout is not a terminal (for scripts)."""
    if epoch is None:
        return ""
    import time as _time

    if not sys.stdout.isatty():
        return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    fmt = "%H:%M:%S" if _time.localtime(epoch)[:3] == _time.localtime(now)[:3] \
        else "%Y-%m-%d %H:%M"
    return _time.strftime(fmt, _time.localtime(epoch))


def shown_status(task: dict[str, Any]) -> str:
    """A task's status as views show it: the phase for running tasks (queued, waiting,
    running), the status otherwise."""
    phase = task.get("phase")
    if task.get("status") == "running" and phase in ("queued", "waiting"):
        return str(phase)
    return str(task.get("status"))


def _cell(header: str, value: Any) -> str:
    text = "" if value is None else str(value)
    if header == "status" and text in STATUS_COLOURS:
        return f"[{STATUS_COLOURS[text]}]{text}[/]"
    return text.replace("[", r"\[")


def counts_text(counts: dict[str, int]) -> str:
    """``completed=3 running=1`` with colours."""
    return "  ".join(f"[{STATUS_COLOURS.get(k, 'white')}]{k}={v}[/]"
                     for k, v in sorted(counts.items()) if v)


def shown_counts(tasks: list[dict[str, Any]]) -> dict[str, int]:
    """Tasks per shown status (queued and waiting counted apart from running)."""
    out: dict[str, int] = {}
    for t in tasks:
        key = shown_status(t)
        out[key] = out.get(key, 0) + 1
    return out


def print_status(summary: dict[str, Any], page: TaskPage) -> None:
    """Workflow header, counts and a page of tasks (chosen by ``task_page``: those that
    need attention first when not all are shown), then a line saying how to see the
    rest."""
    from rich.console import Console

    out = Console()
    colour = STATUS_COLOURS.get(summary["status"], "white")
    out.print(f"[bold]{summary['id']}[/]  {summary['name']}  [{colour}]{summary['status']}[/]")
    out.print(counts_text(page.counts if page.total else summary["counts"]))
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
    print_tasks(page.rows)
    more_note(summary["id"], page, out)


def more_note(workflow_id: str, page: TaskPage, out: Console) -> None:
    """The line saying how many tasks a page left out and how to list them."""
    if page.total > len(page.rows):
        out.print(f"... and {page.total - len(page.rows):,} more tasks (all of them: dagq "
                  f"tasks {workflow_id}; --status, --prefix, --limit and "
                  "--offset select; dagq status --limit 0 shows every task here)",
                  soft_wrap=True, highlight=False)


def print_tasks(tasks: list[dict[str, Any]], now: float | None = None) -> None:
    """The task table: name, status (queued/waiting told from running), queue, attempt,
    start, duration and when a delayed task is due, or its error or note."""
    import time as _time

    now = _time.time() if now is None else now
    print_table(["name", "status", "queue", "attempt", "started", "duration", "detail"], [
        [t["name"], shown_status(t), t["queue"], t["attempt"],
         time_text(started_at(t), now), took_text(t, now), shorten(detail_text(t, now))]
        for t in tasks])


def started_at(task: dict[str, Any]) -> float | None:
    """When the task's attempt started as views show it: never for an attempt still
    queued or waiting (it has been dispatched, not started)."""
    return None if shown_status(task) in ("queued", "waiting") else task.get("dispatched_at")


def took_text(task: dict[str, Any], now: float) -> str:
    """The duration column: ``queued for 44s`` for a queued attempt, ``due in 12s`` for
    a waiting one (no growing run time for an attempt that has not started), else how
    long it ran (or has been running)."""
    shown = shown_status(task)
    due, sent = task.get("due_at"), task.get("dispatched_at")
    if shown == "queued":
        since = due or sent
        return f"queued for {duration_text(max(now - since, 0.0))}" if since else "queued"
    if shown == "waiting":
        return f"due in {duration_text(max(due - now, 0.0))}" if due else "waiting"
    return duration_text(_elapsed(sent, task.get("finished_at"), now))


def detail_text(task: dict[str, Any], now: float) -> str:
    """When a delayed task is due, else its error line, reason, error or note."""
    return due_text(task.get("due_at"), now) or str(
        task.get("error_line") or task.get("reason") or task.get("error") or task.get("note")
        or "")


def _elapsed(start: float | None, end: float | None, now: float) -> float | None:
    if start is None:
        return None
    return (end if end is not None else now) - start


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
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(label, total=total)
        yield lambda: progress.advance(task)

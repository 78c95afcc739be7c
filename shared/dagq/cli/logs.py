"""``dagq logs`` (what an attempt printed) and ``dagq task`` (one task and its attempts)."""

from __future__ import annotations

import shlex
import time
from typing import Any

import click

from dagq.cli.common import emit_json, handle_errors, open_client, store_option
from dagq.cli.exits import TaskNotStarted
from dagq.cli.logstream import FOLLOW_POLL_S, Style, task_logs, workflow_logs
from dagq.cli.render import print_table, shown_status
from dagq.cli.workflow_api import WorkflowAPI
from dagq.protocol.tasklogs import last_lines
from dagq.views.task_details import ACTIVE

REUSED = "reused: the result of "
"""How the note of a task completed with another run's result begins (``engine.seed``)."""


def logs_command(workflow_id: str, task: str) -> str:
    """The shell command that prints a task's log."""
    return f"dagq logs {shlex.quote(workflow_id)} {shlex.quote(task)}"


def failure_lines(client: WorkflowAPI, workflow_id: str, show: int = 20) -> list[str]:
    """Lines naming each failed task, its error's meaningful line and its log command."""
    failed = client.tasks(workflow_id, status="failed")
    out = []
    for t in failed[:show]:
        out.append(f"  {t['name']} (attempt {t['attempt']}): {t['error_line'] or 'failed'}")
        out.append(f"    log: {logs_command(workflow_id, t['name'])}")
    if len(failed) > show:
        out.append(f"  ... and {len(failed) - show} more: "
                   f"dagq tasks {shlex.quote(workflow_id)} --status failed")
    return out


def _wait_started(client: WorkflowAPI, workflow_id: str, task: str) -> int:
    """The task's latest attempt, waiting for the first one to start."""
    while True:
        info = client.task(workflow_id, task)
        if info["attempt"] >= 1:
            return int(info["attempt"])
        if info["status"] not in ACTIVE:
            raise TaskNotStarted(_never_ran(workflow_id, task, info))
        time.sleep(FOLLOW_POLL_S)


def _never_ran(workflow_id: str, task: str, info: dict[str, Any]) -> str:
    why = f": {info['reason']}" if info.get("reason") else ""
    note = info.get("note")
    if isinstance(note, str) and note.startswith(REUSED):  # dagq rerun --from kept it
        run, _, rest = note[len(REUSED):].partition("/")
        name, _, number = rest.rpartition("/")
        why = (f": {note}; `dagq logs {shlex.quote(run)} {shlex.quote(name)} --attempt "
               f"{number}` shows what it printed")
    return f"task {task!r} of workflow {workflow_id!r} never ran (status {info['status']}{why})"


def _not_started(workflow_id: str, task: str, info: dict[str, Any]) -> str | None:
    """Why the task has printed nothing yet (its latest attempt has not started), or None."""
    if info["attempt"] < 1:
        if info["status"] not in ACTIVE:
            return _never_ran(workflow_id, task, info)
        return (f"task {task!r} of workflow {workflow_id!r} has not started yet (status "
                f"{info['status']}); `dagq logs {shlex.quote(workflow_id)} "
                f"{shlex.quote(task)} -f` waits for it")
    if info["status"] == "running" and info.get("phase") in ("queued", "waiting"):
        return (f"attempt {info['attempt']} of task {task!r} is {info['phase']} on queue "
                f"{info['queue']!r}: no worker has started it, so it printed nothing yet "
                f"(`dagq explain {shlex.quote(workflow_id)} {shlex.quote(task)}` says why; "
                "-f waits for it)")
    return None


@click.command()
@click.argument("workflow_id")
@click.argument("task", required=False)
@click.option("--attempt", type=click.IntRange(min=1), default=None,
              help="Attempt number (default: the latest).")
@click.option("--all", "all_", is_flag=True, help="Every attempt, oldest first.")
@click.option("--follow", "-f", is_flag=True,
              help="Keep printing while the task runs, into its next attempts; exit when "
                   "it can print nothing more.")
@click.option("--tail", type=click.IntRange(min=0), default=None,
              help="Only the last N lines (then new ones with --follow).")
@click.option("--timestamps", "-t", is_flag=True,
              help="Start each line with an ISO-8601 UTC time (when it was read while "
                   "following; else its attempt's start).")
@click.option("--json", "as_json", is_flag=True,
              help='One JSON object per line: {"workflow","task","attempt","line"} '
                   '(+ "time" with --timestamps).')
@store_option
@click.pass_context
@handle_errors
def logs(ctx: click.Context, workflow_id: str, task: str | None, attempt: int | None,
         all_: bool, follow: bool, tail: int | None, timestamps: bool, as_json: bool,
         store: str | None) -> None:
    """Print what an attempt of TASK printed (stdout and stderr together); without TASK,
    every task's attempts, each line prefixed by its task (`-f` follows them all).

    Exit 7 when the task has not started (nothing printed yet), 5 when there is no such
    workflow, task or attempt."""
    if all_ and attempt is not None:
        raise click.UsageError("give --attempt N or --all, not both")
    client = open_client(ctx, store)
    style = Style(timestamps=timestamps, as_json=as_json)
    if task is None:
        if attempt is not None or tail is not None:
            raise click.UsageError("--attempt and --tail need a TASK")
        if not workflow_logs(client, workflow_id, follow=follow, style=style) and not follow:
            click.echo(f"no task of {workflow_id} has started yet", err=True)
        return
    if follow and attempt is None:
        latest = _wait_started(client, workflow_id, task)
    else:
        info = client.task(workflow_id, task)
        latest = int(info["attempt"])
        why = None if attempt is not None and attempt < latest \
            else _not_started(workflow_id, task, info)
        if why is not None and not follow:
            raise TaskNotStarted(why)
    _hint_child(client, workflow_id, task, attempt or latest)
    cut = (lambda data: last_lines(data, tail)) if tail is not None else None
    if all_:
        task_logs(client, workflow_id, task, 1, None if follow else latest, follow=follow,
                  style=style, tail=cut, headers=True)
    else:
        task_logs(client, workflow_id, task, attempt or latest, attempt, follow=follow,
                  style=style, tail=cut, headers=False)


def _hint_child(client: WorkflowAPI, workflow_id: str, task: str, attempt: int) -> None:
    """A task that runs a child workflow prints nothing itself: say where its logs are."""
    child = client.task(workflow_id, task).get("child")
    if child:
        click.echo(f"task {task!r} runs child workflow {child}: its tasks' logs are "
                   f"`dagq logs {shlex.quote(child)} TASK` (`dagq status {shlex.quote(child)}` "
                   "lists them)", err=True)


def _attempt_row(rec: dict[str, Any]) -> list[Any]:
    ended = rec.get("exit_code")
    if rec.get("signal"):
        ended = f"signal {rec['signal']}"
    dur = rec.get("duration_s")
    return [rec.get("attempt"), rec.get("run") or "", rec.get("result"), rec.get("worker"),
            time.strftime("%H:%M:%S", time.gmtime(rec["started_at"]))
            if rec.get("started_at") else "",
            f"{dur:.1f}s" if isinstance(dur, int | float) else "",
            "" if ended is None else ended, (rec.get("error") or "")[:60]]


@click.command(name="task")
@click.argument("workflow_id")
@click.argument("task")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@store_option
@click.pass_context
@handle_errors
def task_(ctx: click.Context, workflow_id: str, task: str, as_json: bool,
          store: str | None) -> None:
    """Show one task: status, why it ended, and every attempt (worker, exit, error)."""
    info = open_client(ctx, store).task(workflow_id, task)
    if as_json:
        emit_json(info)
        return
    click.echo(f"{info['name']}: {shown_status(info)} (queue {info['queue']}, "
               f"attempt {info['attempt']})")
    for label in ("reason", "error_line"):
        if info.get(label):
            click.echo(f"  {label.replace('_', ' ')}: {info[label]}")
    if info["attempts"]:
        rows = [_attempt_row(r) for r in info["attempts"]]
        head = ["attempt", "run", "result", "worker", "started", "took", "exit", "error"]
        if not any(r.get("run") for r in info["attempts"]):  # no attempt ran twice
            head, rows = head[:1] + head[2:], [r[:1] + r[2:] for r in rows]
        print_table(head, rows)
    if info["attempt"] >= 1:
        click.echo(f"log: {logs_command(workflow_id, task)}" +
                   (" --all" if info["attempt"] > 1 else ""))


COMMANDS = (logs, task_)
"""The commands this module adds to ``dagq``."""

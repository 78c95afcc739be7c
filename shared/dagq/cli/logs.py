"""``dagq logs`` (what an attempt printed) and ``dagq task`` (one task and its attempts)."""

from __future__ import annotations

import shlex
import sys
import time
from typing import Any

import click

from dagq.cli.common import emit_json, handle_errors, open_client, store_option
from dagq.cli.render import print_table
from dagq.cli.workflow_api import WorkflowAPI
from dagq.errors import TaskError
from dagq.protocol.tasklogs import last_lines
from dagq.views.task_details import ACTIVE

FOLLOW_POLL_S = 0.5


def logs_command(workflow_id: str, task: str) -> str:
    """The shell command that prints a task's log."""
    return f"dagq logs {shlex.quote(workflow_id)} {shlex.quote(task)}"


def _write(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def failure_lines(client: WorkflowAPI, workflow_id: str, show: int = 20) -> list[str]:
    """Lines naming each failed task, its error's meaningful line and its log command."""
    failed = client.tasks(workflow_id, status="failed")
    out = []
    for t in failed[:show]:
        out.append(f"  {t['name']} (attempt {t['attempt']}): {t['error_line'] or 'failed'}")
        out.append(f"    log: {logs_command(workflow_id, t['name'])}")
    if len(failed) > show:
        out.append(f"  ... and {len(failed) - show} more: "
                   f"dagq tasks --workflow {shlex.quote(workflow_id)} --status failed")
    return out


def _wait_started(client: WorkflowAPI, workflow_id: str, task: str) -> int:
    """The task's latest attempt, waiting for the first one to start."""
    while True:
        info = client.task(workflow_id, task)
        if info["attempt"] >= 1:
            return int(info["attempt"])
        if info["status"] not in ACTIVE:
            raise TaskError(f"task {task!r} of workflow {workflow_id!r} never ran "
                            f"(status {info['status']}" +
                            (f": {info['reason']})" if info.get("reason") else ")"))
        time.sleep(FOLLOW_POLL_S)


def _show(client: WorkflowAPI, workflow_id: str, task: str, attempt: int | None,
          tail: int | None, follow: bool) -> None:
    got = client.logs(workflow_id, task, attempt, follow=follow)
    _write(last_lines(got.data, tail) if tail is not None else got.data)
    offset, finished = got.next_offset, got.finished
    while follow and not finished:
        time.sleep(FOLLOW_POLL_S)
        got = client.logs(workflow_id, task, got.attempt, offset, follow=True)
        _write(got.data)
        offset, finished = got.next_offset, got.finished


@click.command()
@click.argument("workflow_id")
@click.argument("task")
@click.option("--attempt", type=click.IntRange(min=1), default=None,
              help="Attempt number (default: the latest).")
@click.option("--all", "all_", is_flag=True, help="Every attempt, oldest first.")
@click.option("--follow", "-f", is_flag=True,
              help="Keep printing while the attempt runs; exit when it ends.")
@click.option("--tail", type=click.IntRange(min=0), default=None,
              help="Only the last N lines (then new ones with --follow).")
@store_option
@click.pass_context
@handle_errors
def logs(ctx: click.Context, workflow_id: str, task: str, attempt: int | None, all_: bool,
         follow: bool, tail: int | None, store: str | None) -> None:
    """Print what an attempt of TASK printed (stdout and stderr together)."""
    if all_ and attempt is not None:
        raise click.UsageError("give --attempt N or --all, not both")
    client = open_client(ctx, store)
    latest = _wait_started(client, workflow_id, task) if follow and attempt is None \
        else int(client.task(workflow_id, task)["attempt"])
    if latest < 1:
        raise TaskError(f"task {task!r} of workflow {workflow_id!r} has not started yet "
                        f"(use --follow to wait for it)")
    _hint_child(client, workflow_id, task, attempt or latest)
    if not all_:
        _show(client, workflow_id, task, attempt, tail, follow)
        return
    records = {r["attempt"]: r for r in client.task(workflow_id, task)["attempts"]}
    for n in range(1, latest + 1):
        rec = records.get(n, {})
        _write(f"==> {task} attempt {n}: {rec.get('result', 'unknown')}"
               f"{' on ' + rec['worker'] if rec.get('worker') else ''} <==\n".encode())
        _show(client, workflow_id, task, n, tail, follow and n == latest)


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
    click.echo(f"{info['name']}: {info['status']} (queue {info['queue']}, "
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

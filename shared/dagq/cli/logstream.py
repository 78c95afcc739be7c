"""Printing stored task logs: one task's attempts, or a whole workflow's tasks.

A whole workflow's lines are prefixed by their task; either can be followed live,
stamped with times, or printed as JSON lines.

An attempt taken from the cache printed nothing: its place holds one line naming the
attempt whose result it reused and the command that shows what that one printed.

Stored logs carry no time per line (``dagq.protocol.tasklogs``), so ``--timestamps``
stamps a line with the time it was read while following, and a line already stored
when it is read with the start of its attempt (from the attempt's record).
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dagq.cli.common import emit_json_line, iso_time
from dagq.cli.workflow_api import WorkflowAPI
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES
from dagq.errors import TaskNotFound
from dagq.views.task_details import ACTIVE

FOLLOW_POLL_S = 0.5
"""Seconds between reads while following."""


@dataclass(frozen=True)
class Style:
    """How lines are printed: stamped with times, as JSON lines, under a task prefix."""

    timestamps: bool = False
    as_json: bool = False
    prefixed: bool = False
    width: int = 0
    """Width the task prefix is padded to (aligned columns on a terminal)."""


@dataclass
class Stream:
    """The lines of one attempt of one task, printed as they come (partial lines wait
    for their end)."""

    workflow_id: str
    task: str
    attempt: int
    style: Style
    started_at: float | None = None
    offset: int = 0
    finished: bool = False
    reads: int = 0
    _rest: bytes = b""

    def feed(self, data: bytes, *, live: bool) -> None:
        """Print the complete lines of ``data`` (after what came before)."""
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()
        for line in lines:
            self._line(line, live)

    def close(self) -> None:
        """Print a last line the attempt did not end with a newline."""
        if self._rest:
            self._line(self._rest, live=False)
            self._rest = b""

    def _line(self, raw: bytes, live: bool) -> None:
        stamp = time.time() if live or self.started_at is None else self.started_at
        if self.style.as_json:
            record: dict[str, Any] = {"workflow": self.workflow_id, "task": self.task,
                                      "attempt": self.attempt,
                                      "line": raw.decode("utf-8", "replace")}
            if self.style.timestamps:
                record["time"] = iso_time(stamp)
            emit_json_line(record)
            return
        head = b""
        if self.style.timestamps:
            head += iso_time(stamp).encode() + b" "
        if self.style.prefixed:
            label = self.task if self.attempt == 1 else f"{self.task}#{self.attempt}"
            head += label.ljust(self.style.width).encode() + b" | "
        sys.stdout.buffer.write(head + raw + b"\n")
        sys.stdout.buffer.flush()


def _started(info: dict[str, Any], attempt: int) -> float | None:
    for rec in info.get("attempts") or []:
        if rec.get("attempt") == attempt and isinstance(rec.get("started_at"), int | float):
            return float(rec["started_at"])
    return None


def _record(info: dict[str, Any], attempt: int) -> dict[str, Any] | None:
    """The newest history record of ``attempt`` in a task summary, if any."""
    recs = [r for r in info.get("attempts") or [] if r.get("attempt") == attempt]
    return recs[-1] if recs else None


def cached_note(info: dict[str, Any], attempt: int) -> str | None:
    """For an attempt taken from the cache, the line that says whose result it is."""
    rec = _record(info, attempt)
    source = rec.get("cached_from") if rec is not None and rec.get("result") == "cached" \
        else None
    if not isinstance(source, str):
        return None
    run, _, rest = source.partition("/")
    task, _, number = rest.rpartition("/")
    return (f"attempt {attempt} was taken from the cache: the result of {source} "
            f"(dagq logs {shlex.quote(run)} {shlex.quote(task)} --attempt {number} shows "
            "what it printed)")


def read_into(client: WorkflowAPI, stream: Stream, *, follow: bool, live: bool,
              tail: Callable[[bytes], bytes] | None = None) -> None:
    """Read what ``stream``'s attempt printed past its offset and print it."""
    got = client.logs(stream.workflow_id, stream.task, stream.attempt, stream.offset,
                      follow=follow)
    data = tail(got.data) if tail is not None else got.data
    stream.feed(data, live=live)
    stream.offset, stream.finished = got.next_offset, got.finished
    stream.reads += 1


def header(task: str, attempt: int, rec: dict[str, Any] | None) -> None:
    """``==> TASK attempt N: RESULT on WORKER <==`` before an attempt's lines."""
    rec = rec or {}
    sys.stdout.buffer.write(f"==> {task} attempt {attempt}: {rec.get('result', 'running')}"
                            f"{' on ' + rec['worker'] if rec.get('worker') else ''} <==\n"
                            .encode())
    sys.stdout.buffer.flush()


def task_logs(client: WorkflowAPI, workflow_id: str, task: str, first: int, last: int | None,
              *, follow: bool, style: Style, tail: Callable[[bytes], bytes] | None,
              headers: bool) -> None:
    """Attempts ``first``..``last`` of ``task`` (``last=None``: every attempt there is,
    and with ``follow`` every later one, until the task can print nothing more)."""
    n = first
    while True:
        info = client.task(workflow_id, task)
        if headers and not style.as_json:
            header(task, n, _record(info, n))
        stream = Stream(workflow_id, task, n, style, _started(info, n))
        note = cached_note(info, n)
        if note is not None:
            stream.feed(note.encode() + b"\n", live=False)
            stream.finished = True
        else:
            read_into(client, stream, follow=follow, live=False, tail=tail)
        while follow and not stream.finished:
            time.sleep(FOLLOW_POLL_S)
            read_into(client, stream, follow=True, live=True)
        if follow:
            tail = None  # later attempts are followed from their first line
        stream.close()
        if last is not None and n >= last:
            return
        n += 1
        while True:  # the next attempt: there already, yet to come (following), or none
            info = client.task(workflow_id, task)
            if info["attempt"] >= n:
                break
            if not follow or info["status"] not in ACTIVE:
                return
            time.sleep(FOLLOW_POLL_S)
        headers = True


def workflow_logs(client: WorkflowAPI, workflow_id: str, *, follow: bool,
                  style: Style) -> int:
    """Every attempt of every task of the workflow, each line prefixed by its task (in
    definition order; following, in the order lines arrive); the number of attempts."""
    streams: dict[tuple[str, int], Stream] = {}
    while True:
        ended = str(client.summary(workflow_id)["status"]) in TERMINAL_WORKFLOW_STATUSES
        rows = client.tasks(workflow_id)
        width = max((len(r["name"]) + (3 if r["attempt"] > 1 else 0) for r in rows), default=0)
        shown = Style(style.timestamps, style.as_json, True,
                      width if sys.stdout.isatty() else 0)
        for row in rows:
            for n in range(1, int(row["attempt"]) + 1):
                key = (str(row["name"]), n)
                stream = streams.get(key)
                if stream is None:
                    stream = streams[key] = Stream(workflow_id, key[0], n, shown,
                                                   _started(row, n))
                if stream.finished:
                    continue
                note = cached_note(row, n)
                if note is not None:
                    stream.feed(note.encode() + b"\n", live=False)
                    stream.finished = True
                    continue
                try:
                    read_into(client, stream, follow=follow, live=follow and stream.reads > 0)
                except TaskNotFound:
                    continue
                if stream.finished or not follow:
                    stream.close()
        if not follow or (ended and all(s.finished for s in streams.values())):
            return len(streams)
        time.sleep(FOLLOW_POLL_S)

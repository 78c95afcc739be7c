"""The exit codes every ``dagq`` command shares, and the error each one stands for.

One table (also in docs/observing.md), so a script can tell outcomes apart whichever
command it ran:

| code | meaning |
|---|---|
| 0 | success; the workflow(s) completed |
| 1 | failed: a workflow failed, input was invalid, problems were found, an error |
| 2 | usage error (bad flags or arguments) |
| 3 | the workflow ended cancelled |
| 4 | ``--timeout`` ran out first |
| 5 | not found: no such workflow, task, attempt, file or schedule |
| 6 | already finished: ``cancel``/``retry`` had nothing to do |
| 7 | not started: the task has no attempt yet, so there is nothing to show |
| 130 | interrupted (Ctrl-C) |
"""

from __future__ import annotations

from collections.abc import Iterable

from dagq.errors import (
    DagqError,
    MissingFile,
    NotFound,
    ScheduleNotFound,
    TaskNotFound,
    WorkflowFinished,
    WorkflowNotFound,
)

OK = 0
"""Success; the workflow(s) completed."""
FAILED = 1
"""A workflow failed, input was invalid, problems were found, or another error."""
USAGE = 2
"""Bad flags or arguments (click's own code)."""
CANCELLED = 3
"""The workflow ended cancelled."""
TIMEOUT = 4
"""``--timeout`` ran out before the workflow ended."""
NOT_FOUND = 5
"""No workflow, task, attempt, file or schedule by that name."""
ALREADY_FINISHED = 6
"""``cancel``/``retry`` found the workflow already finished: nothing changed."""
NOT_STARTED = 7
"""The task has no attempt yet (``dagq logs`` without ``--follow``)."""
INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT, as shells report it)."""

OUTCOMES = {"completed": OK, "failed": FAILED, "cancelled": CANCELLED, "timeout": TIMEOUT,
            "not_found": NOT_FOUND}
"""Exit code per outcome of a wait (``wait``, ``watch``, ``run``, ``submit --wait``)."""


class TaskNotStarted(DagqError):
    """Raised by the CLI when a task it should show has not run yet (exit 7)."""


def code_of(exc: DagqError) -> int:
    """The exit code an error stands for."""
    if isinstance(exc, WorkflowNotFound | TaskNotFound | ScheduleNotFound | NotFound
                  | MissingFile):
        return NOT_FOUND
    if isinstance(exc, WorkflowFinished):
        return ALREADY_FINISHED
    if isinstance(exc, TaskNotStarted):
        return NOT_STARTED
    return FAILED


def outcome_code(statuses: Iterable[str]) -> int:
    """Exit code of a set of terminal statuses: failed before cancelled before completed."""
    seen = set(statuses)
    for status in ("failed", "cancelled"):
        if status in seen:
            return OUTCOMES[status]
    return OK

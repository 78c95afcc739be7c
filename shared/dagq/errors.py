"""Every error dagq raises on purpose, in one tree.

::

    DagqError
    ├── ConfigError                 bad DAGQ_* setting or flag value
    ├── DefinitionError             a workflow definition is invalid (carries every problem)
    ├── ConditionError              a condition expression is invalid
    ├── CronError                   a cron expression or time zone is invalid
    ├── StoreError                  a backend operation failed
    │   ├── NotFound                the named object does not exist
    │   ├── AlreadyExists           create-only write hit an existing object
    │   ├── PreconditionFailed      a conditional write lost a compare-and-swap race
    │   └── StoreUnavailable        the backend cannot be reached or refused the credentials
    ├── WorkflowNotFound            no workflow has the given id
    ├── IdConflict                  an id is already used by a different definition
    ├── TaskError                   a task could not run or reported something invalid
    │   └── TaskNotFound            the workflow has no such task (or attempt)
    ├── MissingFile                 a file named on the command line does not exist
    ├── BadMessage                  a queue message is malformed (dead-lettered, never retried)
    └── RemoteError                 the HTTP API refused a request (key, limits, server fault)

Messages say what went wrong, where, and how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass


class DagqError(Exception):
    """Base class of every error dagq raises on purpose."""


class ConfigError(DagqError):
    """Raised when a setting (environment variable or flag) has a bad value."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a definition."""

    message: str
    """What is wrong and how to fix it."""
    task: str | None = None
    """Name of the task the problem is in, if any."""
    field: str | None = None
    """Dotted path of the offending field, e.g. ``tasks[2].dep_policy``."""
    line: int | None = None
    """1-based line in the source file (YAML only)."""
    column: int | None = None
    """1-based column in the source file (YAML only)."""

    def __str__(self) -> str:
        where = []
        if self.line is not None:
            where.append(f"line {self.line}" + (f":{self.column}" if self.column else ""))
        if self.task is not None:
            where.append(f"task {self.task!r}")
        if self.field is not None:
            where.append(self.field)
        prefix = ", ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message

    def to_json(self) -> dict[str, object]:
        """The problem as a JSON object (used by the HTTP API)."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


class DefinitionError(DagqError):
    """Raised when a workflow definition is invalid; ``problems`` lists every problem found."""

    def __init__(self, problems: list[Problem], source: str | None = None) -> None:
        self.problems = problems
        self.source = source
        head = f"{source}: " if source else ""
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{head}{len(problems)} problem(s) in workflow definition:\n{lines}")


class ConditionError(DagqError):
    """Raised when a condition expression cannot be parsed or uses something not allowed."""

    def __init__(self, message: str, expression: str, position: int | None = None) -> None:
        self.message = message
        self.expression = expression
        self.position = position
        pointer = ""
        if position is not None:
            pointer = f"\n    {expression}\n    {' ' * position}^"
        super().__init__(f"{message}{pointer}")


class CronError(DagqError):
    """Raised when a cron expression, time zone or schedule option is invalid."""


class ScheduleNotFound(DagqError):
    """Raised when no schedule has the given name."""


class ScheduleExists(DagqError):
    """Raised when adding a schedule whose name is taken."""


class StoreError(DagqError):
    """Raised when a backend operation fails."""


class NotFound(StoreError):
    """Raised when the named object does not exist."""


class AlreadyExists(StoreError):
    """Raised when a create-only write finds the object already there."""


class PreconditionFailed(StoreError):
    """Raised when a conditional write finds a different ETag (another writer won)."""


class StoreUnavailable(StoreError):
    """Raised when the backend cannot be reached or rejects the credentials."""


class MissingRight(StoreUnavailable):
    """Raised when the credentials work but lack a right an optional operation needs (such
    as the Service Bus Manage right for queue lengths)."""


class WorkflowNotFound(DagqError):
    """Raised when no workflow has the given id."""


class WorkflowFinished(DagqError):
    """Raised when cancel or retry finds nothing to do: the workflow already ended
    (``status`` is its status: cancel of any finished one, retry of a completed one)."""

    def __init__(self, message: str, workflow_id: str, status: str) -> None:
        super().__init__(message)
        self.workflow_id = workflow_id
        self.status = status


class IdConflict(DagqError):
    """Raised when a client-chosen id is already used by a different definition."""


class TaskError(DagqError):
    """Raised when a task cannot run or reports something invalid (e.g. a non-JSON output)."""


class BadMessage(DagqError):
    """Raised when a queue message cannot be decoded into a dagq message."""


class RemoteError(DagqError):
    """Raised by the HTTP client for an answer no other error here describes (a missing
    key, a request over a limit, a server fault); carries the answer's status and code."""

    def __init__(self, message: str, status: int, code: str = "",
                 details: list[object] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.details = details or []


class TaskNotFound(TaskError):
    """Raised when a workflow has no task (or no attempt) by the given name or number."""


class MissingFile(DagqError):
    """Raised when a file named on the command line does not exist (not a definition
    problem: there is nothing to read)."""

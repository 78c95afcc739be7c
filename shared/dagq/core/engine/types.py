"""Value types exchanged with the engine: completions in, effects and outbox entries out.

All of them are plain immutable data (``Effects`` is a mutable collector) so the runtime
can log, serialise and compare them; the ones the engine makes in bulk are named tuples
because they are several times cheaper to build than frozen dataclasses.
``child_workflow_id`` names child workflows.
"""

from __future__ import annotations

import hashlib
import re
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from dagq.core.model import TASK_STATUSES, OutputRef

OutboxKind = Literal["dispatch", "child", "notice", "notify"]


@dataclass(frozen=True, slots=True)
class Completion:
    """The outcome of one attempt of one task, as reported by a worker (or a child)."""

    task: str
    """Task name."""
    attempt: int
    """The attempt that ran (from the task message)."""
    success: bool
    """True if the attempt succeeded."""
    output: Any = None
    """Inline JSON output of a successful attempt."""
    output_ref: OutputRef | None = None
    """Where a large output was stored instead of ``output``."""
    error: str | None = None
    """What went wrong, for a failed attempt."""
    released: bool = False
    """The worker gave the attempt back (e.g. preemption): run it again, not a failure."""
    cached: str | None = None
    """A result taken from the cache instead of running: ``run/task/attempt`` of its
    source (kept as the task's note)."""


class Dispatch(NamedTuple):
    """Send one attempt of a task to its queue."""

    key: str
    """Deterministic dispatch id ``{workflow_id}/{task}/{attempt}`` (the queue message id);
    a re-dispatch of a released attempt appends ``.{n}``."""
    task: str
    """Task name."""
    attempt: int
    """Attempt number, from 1."""
    queue: str
    """Queue (hardware class) to send to."""
    delay_s: float
    """Make the message visible this many seconds after the dispatch was decided."""
    timeout_s: float | None
    """Run-time limit of the attempt (``None``: no limit)."""


class ChildSubmit(NamedTuple):
    """Submit the child workflow that runs one attempt of a sub-workflow task."""

    key: str
    """Deterministic id ``{workflow_id}/{task}/{attempt}`` of this submission."""
    task: str
    """The parent task."""
    attempt: int
    """The parent task's attempt."""
    child_id: str
    """Id of the child workflow: ``child_workflow_id(parent_id, task, attempt)``."""
    delay_s: float = 0.0
    """Submit no earlier than this many seconds after the decision (delay or backoff)."""


class ParentNotice(NamedTuple):
    """Tell a parent workflow that this child workflow reached a terminal status."""

    parent_id: str
    """The parent workflow."""
    task: str
    """The parent task the child runs for."""
    attempt: int
    """The parent task's attempt."""
    success: bool
    """True if the child completed."""
    error: str | None
    """Why the child did not complete."""
    key: str = ""
    """Deterministic id of this notice (``{child_id}/notice-{n}``)."""


class NotifyEvent(NamedTuple):
    """Fire the hooks of a run that reached a terminal status (``dagq.core.hooks``):
    recorded only for a definition with ``on_finish``/``on_failure``, sent by
    ``dagq.runtime.notify`` after the state write."""

    key: str
    """The event id, unique per event: ``{workflow_id}/event-{number}``."""
    status: str
    """The terminal status reached: ``completed``, ``failed`` or ``cancelled``."""
    number: int
    """How many events this run has had, this one included (a retried run ends again)."""
    counts: dict[str, int]
    """Tasks by status when the status was reached."""
    failed: tuple[tuple[str, int, str | None], ...]
    """The first failed tasks: ``(task, attempt, error summary)``."""
    failed_total: int
    """How many tasks failed in all."""


@dataclass(frozen=True, slots=True)
class ParentLink:
    """Where a child workflow reports to: the parent's id, task and attempt."""

    workflow_id: str
    """The parent workflow."""
    task: str
    """The parent task."""
    attempt: int
    """The parent task's attempt that started this child."""


class OutboxEntry(NamedTuple):
    """A message the engine decided to send, kept in the state until it is known sent."""

    kind: OutboxKind
    """``dispatch``, ``child``, ``notice`` or ``notify``."""
    payload: Dispatch | ChildSubmit | ParentNotice | NotifyEvent
    """What to send."""
    written_at: float
    """When the decision was made (epoch seconds)."""

    @property
    def key(self) -> str:
        """The entry's deterministic id (also its key in ``state.outbox``)."""
        return self.payload.key


class TaskView(NamedTuple):
    """Read-only snapshot of one task's runtime state."""

    name: str
    status: str
    attempt: int
    """Latest attempt number (0 before the first dispatch)."""
    queue: str
    output: Any
    output_ref: OutputRef | None
    error: str | None
    """Error of the latest failed attempt (kept while a retry runs)."""
    note: str | None
    """Why a condition was false or could not be evaluated."""
    dispatched_at: float | None
    finished_at: float | None
    due_at: float | None = None
    """For an attempt sent with a delay (``delay_s`` or a retry backoff): when it may
    start; None when it was sent without one."""


@dataclass(slots=True)
class Effects:
    """What one engine call decided; everything here is also reflected in the state."""

    dispatched: list[Dispatch] = field(default_factory=list)
    """Task attempts to send (also in the outbox)."""
    children: list[ChildSubmit] = field(default_factory=list)
    """Child workflows to submit (also in the outbox)."""
    notices: list[ParentNotice] = field(default_factory=list)
    """Notices to the parent workflow (also in the outbox)."""
    stop: list[tuple[str, int]] = field(default_factory=list)
    """Running ``(task, attempt)`` pairs to stop (cancel, timeout)."""
    moves: array[int] = field(default_factory=lambda: array("q"))
    """Task status changes in order, packed as ``index << 8 | old << 4 | new`` (status
    codes index ``TASK_STATUSES``): a wide fan-out makes hundreds of thousands of them,
    so they are kept as machine integers; ``transitions`` spells them out."""
    names: Sequence[str] = ()
    """Task names by index (to spell out ``moves``)."""
    ignored: list[tuple[Completion, str]] = field(default_factory=list)
    """Completions that changed nothing, with the reason (duplicate, stale, unknown)."""
    workflow_status: tuple[str, str] | None = None
    """``(old, new)`` if the workflow status changed."""
    notes: dict[str, str] = field(default_factory=dict)
    """Per task: why its condition was false or could not be evaluated."""
    state_changed: bool = False
    """The state changed in a way not listed above (e.g. a cancel request was recorded)."""
    expanded: list[tuple[str, int]] = field(default_factory=list)
    """Mapped tasks that expanded, with their number of instances."""

    @property
    def transitions(self) -> list[tuple[str, str, str]]:
        """Task status changes ``(task, old, new)`` in order."""
        names = self.names
        return [(names[m >> 8], TASK_STATUSES[(m >> 4) & 15], TASK_STATUSES[m & 15])
                for m in self.moves]

    def changed(self) -> bool:
        """True if the call changed the state, so it must be written."""
        return bool(
            self.state_changed or self.moves or self.dispatched or self.children
            or self.notices or self.stop or self.workflow_status is not None
            or self.expanded
        )


_UNSAFE_PARENT = re.compile(r"[^A-Za-z0-9._~-]")
_UNSAFE_TASK = re.compile(r"[^A-Za-z0-9._-]")
MAX_CHILD_ID = 200


def child_workflow_id(parent_id: str, task: str, attempt: int) -> str:
    """Deterministic id of the child workflow run by ``task``'s ``attempt`` in ``parent_id``.

    ``{parent}~{task}~{attempt}`` when both parts are already safe; otherwise unsafe
    characters become ``_`` and ``~h`` plus a hash of the original triple is appended, so
    distinct triples never share an id. The result matches dagq's workflow-id rule
    (letters, digits, ``. _ ~ -``, at most 200 characters, first a letter or digit), so
    it is valid as a Table row key and a blob name.
    """
    p = _UNSAFE_PARENT.sub("_", parent_id)
    t = _UNSAFE_TASK.sub("_", task)
    base = f"{p}~{t}~{attempt}"
    changed = p != parent_id or t != task or not base[:1].isalnum()
    if not changed and len(base) <= MAX_CHILD_ID:
        return base
    digest = hashlib.sha256(f"{parent_id}\0{task}\0{attempt}".encode()).hexdigest()[:12]
    suffix = f"~h{digest}"
    room = MAX_CHILD_ID - len(suffix)
    if len(base) > room:
        head = room * 2 // 3
        base = f"{base[:head]}_{base[-(room - head - 1):]}"
    if not base[:1].isalnum():
        base = "w" + base[1:]
    return base + suffix

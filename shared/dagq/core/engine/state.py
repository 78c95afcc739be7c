"""The runtime state of one workflow run, and its compact serialisation.

``WorkflowState`` keeps per-task columns indexed by integer task id (see
``engine_graph.Graph``) plus incrementally maintained aggregates (status counts,
per-task counts of succeeded and failed dependencies, the running set), so the engine
can apply a completion in time proportional to what it touches. Only
``dagq.core.engine`` mutates a state; everyone else reads it through the methods
below.

``dumps`` / ``loads`` write and read a versioned, zlib-compressed, columnar JSON
document (``codec``); ``journal`` writes what changed since then as small deltas, using
the change records kept here (``dirty``, ``held_*``, ``outbox_base``).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator
from typing import Any

from dagq.core.engine.graph import (
    COMPLETED,
    OK,
    PENDING,
    READY,
    RUNNING,
    SKIPPED,
    STATUS_CLASS,
    STATUS_NAMES,
    Graph,
)
from dagq.core.engine.types import OutboxEntry, ParentLink, TaskView
from dagq.core.model import (
    TERMINAL_WORKFLOW_STATUSES,
    MappedOutputs,
    OutputRef,
    TaskDef,
    WorkflowDef,
)

__all__ = ["MAX_RETRY_IDS", "WorkflowState"]

MAX_RETRY_IDS = 64
"""How many recent retry request ids a state remembers (retry is idempotent per id)."""


class WorkflowState:
    """Mutable runtime state of one workflow run (mutated only by ``dagq.core.engine``)."""

    __slots__ = (
        "attempt",
        "cancel_reason",
        "cancel_requested",
        "created_at",
        "deadlines",
        "def_blob",
        "definition",
        "delay_used",
        "dirty",
        "dispatched_at",
        "error",
        "events_sent",
        "finished_at",
        "graph",
        "held",
        "held_popped",
        "held_pushed",
        "held_reset",
        "journal_bytes",
        "journal_entries",
        "map_active",
        "map_cursor",
        "maps",
        "maps_new",
        "n_bad",
        "n_ok",
        "note",
        "notices_sent",
        "outbox",
        "outbox_base",
        "output",
        "output_ref",
        "parent",
        "releases",
        "retry_ids",
        "round_start",
        "running_set",
        "sinks_ok",
        "snapshot_bytes",
        "st",
        "status",
        "stopping",
        "suspended",
        "tally",
        "updated_at",
        "workflow_id",
    )

    def __init__(self, definition: WorkflowDef, workflow_id: str, now: float,
                 parent: ParentLink | None = None, graph: Graph | None = None) -> None:
        g = graph if graph is not None else Graph(definition)
        if g.maps and not g.owned:
            g = g.copy()  # expansions add tasks to this run's graph only
        n = len(g.names)
        self.workflow_id = workflow_id
        """The run's id."""
        self.definition = definition
        """The definition being run."""
        self.graph = g
        self.def_blob: bytes | None = None  # the definition, serialised once (engine_codec)
        self.status = "pending"
        """Workflow status: pending, running, completed, failed or cancelled."""
        self.created_at = now
        self.updated_at = now
        self.parent = parent
        """Where this run reports when it ends, if it is a child workflow."""
        self.outbox: dict[str, OutboxEntry] = {}
        """Decided but not yet confirmed-sent messages, by key."""
        self.cancel_requested = False
        self.cancel_reason: str | None = None
        """What the person who cancelled the workflow gave as the reason."""
        self.suspended = False
        """Suspended: no task starts (tasks already running finish, retries included)."""
        self.retry_ids: list[str] = []
        self.notices_sent = 0
        self.events_sent = 0  # hook events recorded (dagq.core.hooks)
        self.st = bytearray(n)  # every task starts PENDING (code 0)
        self.attempt = [0] * n
        self.round_start = [1] * n  # first attempt number of the current retry round
        self.releases = [0] * n  # re-dispatches of the current attempt after a release
        self.output: list[Any] = [None] * n
        self.output_ref: list[OutputRef | None] = [None] * n
        self.error: list[str | None] = [None] * n
        self.note: list[str | None] = [None] * n
        self.dispatched_at: list[float | None] = [None] * n
        self.delay_used = [0.0] * n
        self.finished_at: list[float | None] = [None] * n
        self.stopping = bytearray(n)  # running attempt asked to stop by a cancel
        self.n_ok = [0] * n  # dependencies completed or skipped
        self.n_bad = [0] * n  # dependencies failed, upstream_failed or cancelled
        self.maps: dict[int, list[Any]] = {}
        """Per expanded map head, in expansion order: its items (instance k is item k)."""
        self.maps_new: list[int] = []  # heads expanded since the state was last stored
        self.map_active: dict[int, int] = {}  # per capped head: instances ready or running
        self.map_cursor: dict[int, int] = {}  # per capped head: first instance that may wait
        self.held: deque[int] = deque()  # ready tasks waiting for a parallelism slot
        self.running_set: dict[int, None] = {}
        self.deadlines: list[tuple[float, int, int]] = []  # heap (deadline, task, attempt)
        self.tally = [0] * len(STATUS_NAMES)
        self.tally[PENDING] = n
        self.sinks_ok = 0
        # what changed since the stored form was last written or read (engine.journal):
        self.dirty: set[int] = set()  # tasks with any column changed
        self.held_popped = 0  # tasks taken from the left of ``held``
        self.held_pushed: list[int] = []  # tasks appended to ``held``
        self.held_reset = False  # ``held`` was changed otherwise (a delta carries it whole)
        self.outbox_base: set[str] = set()  # outbox keys as stored
        self.snapshot_bytes = 0  # size of the stored snapshot (0: never stored)
        self.journal_bytes = 0  # size of the deltas stored after it
        self.journal_entries = 0  # how many deltas

    def expand(self, h: int, items: list[Any]) -> int:
        """Add one instance of map head ``h`` per item (every column grows, the instances
        ``pending``); the index of the first. Only ``dagq.core.engine`` calls this."""
        k = len(items)
        start = self.graph.expand(h, k)
        self.maps[h] = items
        self.maps_new.append(h)
        self.st.extend(bytes(k))
        columns: tuple[tuple[list[Any], Any], ...] = (
            (self.attempt, 0), (self.round_start, 1), (self.releases, 0), (self.output, None),
            (self.output_ref, None), (self.error, None), (self.note, None),
            (self.dispatched_at, None), (self.delay_used, 0.0), (self.finished_at, None),
            (self.n_ok, 0), (self.n_bad, 0))
        for col, value in columns:
            col.extend([value] * k)
        self.stopping.extend(bytes(k))
        self.tally[PENDING] += k
        return start

    def item_of(self, i: int) -> tuple[bool, Any]:
        """``(True, item)`` for an instance of a mapped task, ``(False, None)`` otherwise."""
        g = self.graph
        if i < g.n_static:
            return False, None
        k = i - g.n_static
        return True, self.maps[g.head[k]][g.pos[k]]

    def task_def(self, name: str) -> TaskDef:
        """The definition of task ``name`` (an instance's is its mapped task's)."""
        return self.graph.spec(self.graph.index[name])

    def touch(self, i: int) -> None:
        """Record that a column of task ``i`` changed (the next delta carries its row)."""
        self.dirty.add(i)

    # -- read access ---------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """Number of tasks per task status (statuses with no task are left out); an
        expanded map counts as its instances, not as one more completed task."""
        tally = self.tally
        if self.maps:
            tally = list(tally)
            tally[COMPLETED] -= len(self.maps)
        return {name: c for name, c in zip(STATUS_NAMES, tally, strict=True) if c}

    def is_terminal(self) -> bool:
        """True once the workflow is completed, failed or cancelled."""
        return self.status in TERMINAL_WORKFLOW_STATUSES

    def running(self) -> list[tuple[str, int]]:
        """``(task, attempt)`` of every running task (dispatched, delayed or executing),
        in definition order."""
        names, att = self.graph.names, self.attempt
        return [(names[i], att[i]) for i in sorted(self.running_set)]

    def task_view(self, name: str) -> TaskView:
        """A snapshot of task ``name``; raises ``KeyError`` for an unknown task."""
        return self._view(self.graph.index[name])

    def iter_task_views(self) -> Iterator[TaskView]:
        """Snapshots of every task, in definition order."""
        return (self._view(i) for i in range(len(self.st)))

    def inputs_of(self, task: str) -> dict[str, Any]:
        """Outputs of ``task``'s finished direct dependencies, by name.

        A completed dependency gives its output (or its ``OutputRef`` when stored
        outside the state), a skipped one gives ``None``; dependencies that failed, were
        cancelled or have not finished are left out.
        """
        g = self.graph
        i = g.index[task]
        if i >= g.n_static:  # an instance: its map head's inputs, less the mapped list
            h = g.head[i - g.n_static]
            spec = g.maps[h]
            out = self.inputs_of(g.names[h])
            if spec.source == "inputs":
                out.pop(spec.name, None)
            return out
        out = {}
        n = g.n_static
        for d in g.deps[i]:
            code = self.st[d]
            if d >= n:
                self._instance_input(out, d, code)
            elif code == COMPLETED:
                ref = self.output_ref[d]
                out[g.names[d]] = ref if ref is not None else self.output[d]
            elif code == SKIPPED:
                out[g.names[d]] = None
        if self.maps:
            for h in g.base_deps[i]:
                if h in self.maps and g.names[h] not in out:  # a map of no items
                    out[g.names[h]] = MappedOutputs()
        return out

    def _instance_input(self, out: dict[str, Any], d: int, code: int) -> None:
        """Put the output of instance ``d`` at its place in its map head's list."""
        g = self.graph
        k = d - g.n_static
        h = g.head[k]
        name = g.names[h]
        outputs = out.get(name)
        if outputs is None:
            outputs = out[name] = MappedOutputs([None] * len(self.maps[h]))
        if code == COMPLETED:
            ref = self.output_ref[d]
            outputs[g.pos[k]] = ref if ref is not None else self.output[d]

    def deadline(self, i: int) -> float | None:
        """When the current attempt of task ``i`` times out (``None``: never)."""
        timeout = self.graph.timeout[i]
        at = self.dispatched_at[i]
        if timeout is None or at is None:
            return None
        return at + self.delay_used[i] + timeout

    def _view(self, i: int) -> TaskView:
        return TaskView(
            name=self.graph.names[i], status=STATUS_NAMES[self.st[i]], attempt=self.attempt[i],
            queue=self.graph.queue[i], output=self.output[i], output_ref=self.output_ref[i],
            error=self.error[i], note=self.note[i], dispatched_at=self.dispatched_at[i],
            finished_at=self.finished_at[i], due_at=self._due_at(i))

    def _due_at(self, i: int) -> float | None:
        at, delay = self.dispatched_at[i], self.delay_used[i]
        if at is None or not delay or STATUS_NAMES[self.st[i]] != "running":
            return None
        return at + delay

    def rebuild(self) -> None:
        """Recompute every derived aggregate from the per-task columns (used by ``loads``)."""
        g, st = self.graph, self.st
        self.tally = [st.count(code) for code in range(len(STATUS_NAMES))]
        n_ok, n_bad = self.n_ok, self.n_bad
        for i, deps in enumerate(g.deps):
            for d in deps:
                cls = STATUS_CLASS[st[d]]
                if cls == OK:
                    n_ok[i] += 1
                elif cls:
                    n_bad[i] += 1
        self.sinks_ok = sum(1 for i in range(len(st)) if g.sink[i] and STATUS_CLASS[st[i]] == OK)
        self.running_set = {i: None for i in range(len(st)) if st[i] == RUNNING}
        self.map_active, self.map_cursor = {}, {}
        for h, spec in g.maps.items():
            if spec.max_parallelism is not None and h in self.maps:
                self.map_cursor[h] = 0
                self.map_active[h] = sum(1 for k, head in enumerate(g.head) if head == h
                                         and st[g.n_static + k] in (READY, RUNNING))
        for i in self.running_set:
            at = self.deadline(i)
            if at is not None:
                self.deadlines.append((at, i, self.attempt[i]))
        heapq.heapify(self.deadlines)

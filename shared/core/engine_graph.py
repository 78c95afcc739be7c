"""The compiled, immutable shape of a definition that the engine walks: integer ids,
parent and child lists, policy thresholds, queues and timeouts, plus the task status codes.

Built once per state (at ``create`` or ``loads``) in O(tasks + edges), so that applying a
completion only touches the finished task and its direct children.
"""

from __future__ import annotations

from collections import deque

from shared.core.model import TASK_STATUSES, TaskDef, WorkflowDef
from shared.core.policy import required_successes
from shared.errors import DefinitionError, Problem

PENDING, READY, RUNNING, COMPLETED, FAILED, UPSTREAM_FAILED, SKIPPED, CANCELLED = range(8)
STATUS_NAMES: tuple[str, ...] = TASK_STATUSES
STATUS_CODES: dict[str, int] = {name: code for code, name in enumerate(TASK_STATUSES)}

NEUTRAL, OK, BAD = 0, 1, 2
STATUS_CLASS = (NEUTRAL, NEUTRAL, NEUTRAL, OK, BAD, BAD, OK, BAD)
"""Per status code: how a dependency in that status counts for its dependents."""

KIND_TASK, KIND_MERGE, KIND_CHILD = 0, 1, 2


class Graph:
    """Integer-indexed view of a ``WorkflowDef`` (task ``i`` is ``defn.tasks[i]``)."""

    __slots__ = (
        "children", "condition", "delay", "deps", "index", "kind", "max_parallelism",
        "n_sinks", "names", "need", "queue", "roots", "sink", "slack", "tasks", "timeout",
    )

    def __init__(self, defn: WorkflowDef, *, check_cycles: bool = True) -> None:
        tasks = defn.tasks
        self.tasks: tuple[TaskDef, ...] = tasks
        self.names: tuple[str, ...] = tuple(t.name for t in tasks)
        self.index: dict[str, int] = {}
        problems: list[Problem] = []
        for i, name in enumerate(self.names):
            if name in self.index:
                problems.append(Problem("duplicate task name", task=name, field="name"))
            self.index[name] = i
        n = len(tasks)
        self.deps: list[tuple[int, ...]] = []
        kids: list[list[int]] = [[] for _ in range(n)]
        self.need: list[int] = []
        self.slack: list[int] = []
        for i, t in enumerate(tasks):
            ids = []
            for d in t.depends_on:
                j = self.index.get(d)
                if j is None or j == i:
                    what = "itself" if j == i else f"unknown task {d!r}"
                    problems.append(Problem(f"depends on {what}", task=t.name,
                                            field="depends_on"))
                    continue
                ids.append(j)
                kids[j].append(i)
            self.deps.append(tuple(ids))
            try:
                need = required_successes(t.dep_policy, len(ids))
            except ValueError as exc:
                problems.append(Problem(str(exc), task=t.name, field="dep_policy"))
                need = len(ids)
            self.need.append(need)
            self.slack.append(len(ids) - need)
        self.children: list[tuple[int, ...]] = [tuple(k) for k in kids]
        self.sink = bytearray(1 if not k else 0 for k in kids)
        self.n_sinks = sum(self.sink)
        self.roots = tuple(i for i in range(n) if not self.deps[i])
        self.queue: list[str] = [defn.queue_of(t) for t in tasks]
        self.timeout: list[float | None] = [defn.timeout_of(t) for t in tasks]
        self.delay: list[float] = [float(t.delay_s) for t in tasks]
        self.condition: list[str | None] = [t.condition for t in tasks]
        self.kind = bytearray(
            KIND_MERGE if t.merge else KIND_CHILD if t.workflow is not None else KIND_TASK
            for t in tasks)
        self.max_parallelism = defn.max_parallelism
        if check_cycles and not problems:
            cycle = self._find_cycle()
            if cycle:
                path = " -> ".join(self.names[i] for i in cycle)
                problems.append(Problem(f"dependency cycle: {path}", task=self.names[cycle[0]],
                                        field="depends_on"))
        if problems:
            raise DefinitionError(problems, source=f"workflow {defn.name!r}")

    def _find_cycle(self) -> list[int]:
        """One dependency cycle as a closed path of ids, or [] (Kahn's algorithm)."""
        n = len(self.names)
        indeg = [len(d) for d in self.deps]
        todo = deque(i for i in range(n) if indeg[i] == 0)
        seen = 0
        while todo:
            i = todo.popleft()
            seen += 1
            for k in self.children[i]:
                indeg[k] -= 1
                if indeg[k] == 0:
                    todo.append(k)
        if seen == n:
            return []
        # Walk backwards along unresolved dependencies until a task repeats.
        start = next(i for i in range(n) if indeg[i] > 0)
        order: dict[int, int] = {}
        i = start
        while i not in order:
            order[i] = len(order)
            i = next(d for d in self.deps[i] if indeg[d] > 0)
        path = [j for j in order if order[j] >= order[i]]
        path.reverse()
        return [*path, path[0]]

"""The compiled, immutable shape of a definition that the engine walks: integer ids,
parent and child lists, policy thresholds, queues and timeouts, plus the task status codes.

Built once per state (at ``create`` or ``loads``) in O(tasks + edges), so that applying a
completion only touches the finished task and its direct children.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from dagq.core.model import TASK_STATUSES, TaskDef, WorkflowDef
from dagq.core.policy import required_successes
from dagq.errors import DefinitionError, Problem

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
        "n_sinks", "names", "need", "queue", "queue_names", "roots", "sink", "slack", "tasks",
        "timeout",
    )

    def __init__(self, defn: WorkflowDef, *, check_cycles: bool = True) -> None:
        self.tasks: tuple[TaskDef, ...] = defn.tasks
        # a decoded definition gives its tasks' shapes without building TaskDef objects
        shapes = getattr(defn.tasks, "shapes", None)
        tasks: Sequence[Any] = shapes() if shapes is not None else defn.tasks
        n = len(tasks)
        self.names: tuple[str, ...] = tuple(t.name for t in tasks)
        self.index: dict[str, int] = dict(zip(self.names, range(n), strict=True))
        problems: list[Problem] = []
        if len(self.index) != n:
            seen: set[str] = set()
            for name in self.names:
                if name in seen:
                    problems.append(Problem("duplicate task name", task=name, field="name"))
                seen.add(name)
            self.index = {name: i for i, name in reversed(list(enumerate(self.names)))}
        self.deps: list[tuple[int, ...]] = []
        kids: list[list[int]] = [[] for _ in range(n)]
        self.need: list[int] = []
        self.slack: list[int] = []
        index = self.index
        shared: dict[tuple[int, ...], tuple[int, ...]] = {}  # one object per distinct list:
        known: dict[object, tuple[int, ...]] = {}  # the n tasks of a fan-out share (root,)
        find = index.__getitem__
        for i, t in enumerate(tasks):
            if shapes is not None:  # stored ids: checked, not looked up
                ids = t.dependency_ids
                if ids and (i in ids or min(ids) < 0 or max(ids) >= n):
                    problems.append(Problem("the stored dependencies name tasks that do not "
                                            "exist (a damaged state)", task=t.name,
                                            field="depends_on"))
                    ids = ()
            else:
                names = t.depends_on
                ids = known.get(names) if type(names) is tuple else None
                if ids is None:
                    try:
                        ids = tuple(map(find, names))
                    except KeyError:
                        ids = ()
                    ids = shared.setdefault(ids, ids)
                    if type(names) is tuple and len(ids) == len(names):
                        known[names] = ids
                if len(ids) != len(names) or i in ids:
                    ids = self._check_deps(i, t, problems)
            for j in ids:
                kids[j].append(i)
            self.deps.append(ids)
            if t.dep_policy == "all":
                need = len(ids)
            else:
                try:
                    need = required_successes(t.dep_policy, len(ids))
                except ValueError as exc:
                    problems.append(Problem(str(exc), task=t.name, field="dep_policy"))
                    need = len(ids)
            self.need.append(need)
            self.slack.append(len(ids) - need)
        self.children: list[tuple[int, ...]] = [shared.setdefault(c, c)
                                                 for c in map(tuple, kids)]
        self.sink = bytearray(0 if k else 1 for k in kids)
        self.n_sinks = sum(self.sink)
        self.roots = tuple(i for i in range(n) if not self.deps[i])
        default_queue, default_timeout = defn.default_queue, defn.default_task_timeout_s
        self.queue: list[str] = [t.queue or default_queue for t in tasks]
        self.queue_names: frozenset[str] = frozenset(self.queue)
        """Every queue some task of the workflow is sent to."""
        self.timeout: list[float | None] = [
            t.timeout_s if t.timeout_s is not None else default_timeout for t in tasks]
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

    def _check_deps(self, i: int, t: Any, problems: list[Problem]) -> tuple[int, ...]:
        """The valid dependency ids of task ``i``; a problem for each unknown or self one."""
        ids = []
        for d in t.depends_on:
            j = self.index.get(d)
            if j is None or j == i:
                what = "itself" if j == i else f"unknown task {d!r}"
                problems.append(Problem(f"depends on {what}", task=t.name, field="depends_on"))
            else:
                ids.append(j)
        return tuple(ids)

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

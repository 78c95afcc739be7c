"""The compiled, immutable shape of a definition that the engine walks: integer ids,
parent and child lists, policy thresholds, queues and timeouts, plus the task status codes.

Built once per state (at ``create`` or ``loads``) in O(tasks + edges), so that applying a
completion only touches the finished task and its direct children.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from dagq.core.mapping import instance_name, map_spec
from dagq.core.model import TASK_STATUSES, TaskDef, WorkflowDef
from dagq.core.policy import required_successes
from dagq.core.priority import banded
from dagq.errors import DefinitionError, Problem

if TYPE_CHECKING:
    from dagq.core.engine.defcodec import Columns

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
        "base_deps", "children", "condition", "delay", "deps", "head", "index", "kind", "maps",
        "max_parallelism", "n_sinks", "n_static", "names", "need", "owned", "pos", "queue",
        "queue_names", "roots", "sink", "slack", "specs", "starts", "tasks", "timeout",
    )

    def __init__(self, defn: WorkflowDef, *, check_cycles: bool = True) -> None:
        self.tasks: tuple[TaskDef, ...] = defn.tasks
        problems: list[Problem] = []
        # a decoded definition gives its tasks as columns: no TaskDef objects are built
        columns = getattr(defn.tasks, "columns", None)
        found: Iterable[tuple[int, Any]]
        if columns is not None:
            found = zip(*columns().fields.get("map", ((), ())), strict=True)
        else:
            found = ((i, t.map) for i, t in enumerate(defn.tasks) if t.map is not None)
        self.maps: dict[int, Any] = {i: v for i, v in found if v is not None}
        if columns is not None:
            kids = self._from_columns(defn, columns(), problems)
        else:
            kids = self._from_tasks(defn, problems)
        shared: dict[tuple[int, ...], tuple[int, ...]] = {}  # one object per distinct list
        self.children: list[tuple[int, ...]] = [shared.setdefault(c, c)
                                                 for c in map(tuple, kids)]
        self.sink = bytearray(0 if k else 1 for k in kids)
        self.n_sinks = sum(self.sink)
        self.roots = tuple(i for i in range(len(self.names)) if not self.deps[i])
        self.queue_names: frozenset[str] = frozenset(self.queue)
        """Every queue some task of the workflow is sent to."""
        self.max_parallelism = defn.max_parallelism
        self.n_static = len(self.names)
        """Tasks of the definition; instances of mapped tasks come after them."""
        self.head: list[int] = []
        """Per instance (index ``n_static + k``): its map head."""
        self.pos: list[int] = []
        """Per instance: its position in the head's items."""
        self.starts: dict[int, int] = {}
        """Per expanded map head: the index of its first instance."""
        self.specs: dict[int, TaskDef] = {}  # map heads' definitions, built once
        self.owned = False  # True for a copy private to one state (expansions mutate it)
        self.base_deps = self.deps
        """Dependencies as defined (``deps`` after expansions names instances instead)."""
        self._map_specs(problems)
        if check_cycles and not problems:
            cycle = self._find_cycle()
            if cycle:
                path = " -> ".join(self.names[i] for i in cycle)
                problems.append(Problem(f"dependency cycle: {path}", task=self.names[cycle[0]],
                                        field="depends_on"))
        if problems:
            raise DefinitionError(problems, source=f"workflow {defn.name!r}")

    def _name_index(self, names: Sequence[str], problems: list[Problem]) -> None:
        n = len(names)
        self.names: tuple[str, ...] = tuple(names)
        self.index: dict[str, int] = dict(zip(self.names, range(n), strict=True))
        if len(self.index) != n:
            seen: set[str] = set()
            for name in self.names:
                if name in seen:
                    problems.append(Problem("duplicate task name", task=name, field="name"))
                seen.add(name)
            self.index = {name: i for i, name in reversed(list(enumerate(self.names)))}

    def _from_tasks(self, defn: WorkflowDef, problems: list[Problem]) -> list[list[int]]:
        """Build from ``TaskDef`` objects (dependencies by name); the children lists."""
        tasks = defn.tasks
        n = len(tasks)
        self._name_index([t.name for t in tasks], problems)
        self.deps: list[tuple[int, ...]] = []
        kids: list[list[int]] = [[] for _ in range(n)]
        self.need: list[int] = []
        self.slack: list[int] = []
        shared: dict[tuple[int, ...], tuple[int, ...]] = {}  # one object per distinct list:
        known: dict[object, tuple[int, ...]] = {}  # the n tasks of a fan-out share (root,)
        find = self.index.__getitem__
        for i, t in enumerate(tasks):
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
            need = len(ids) if t.dep_policy == "all" else self._need(t.name, t.dep_policy, ids,
                                                                     problems)
            self.need.append(need)
            self.slack.append(len(ids) - need)
        default_queue, default_timeout = defn.default_queue, defn.default_task_timeout_s
        self.queue: list[str] = [t.queue or default_queue for t in tasks]
        if defn.priority is not None or any(t.priority is not None for t in tasks):
            self.queue = banded(self.queue, enumerate(t.priority for t in tasks), defn.priority)
        self.timeout: list[float | None] = [
            t.timeout_s if t.timeout_s is not None else default_timeout for t in tasks]
        self.delay: list[float] = [float(t.delay_s) for t in tasks]
        self.condition: list[str | None] = [t.condition for t in tasks]
        self.kind = bytearray(
            KIND_MERGE if t.merge else KIND_CHILD if t.workflow is not None else KIND_TASK
            for t in tasks)
        return kids

    def _from_columns(self, defn: WorkflowDef, cols: Columns,
                      problems: list[Problem]) -> list[list[int]]:
        """Build from a decoded definition's columns (dependencies as stored indexes, other
        fields sparse); the children lists."""
        n = len(cols.names)
        self._name_index(cols.names, problems)
        shared: dict[tuple[int, ...], tuple[int, ...]] = {}
        self.deps = [shared.setdefault(ids, ids) for ids in map(tuple, cols.deps)]
        for ids in shared:  # each distinct list once
            if ids and (min(ids) < 0 or max(ids) >= n):
                raise DefinitionError([Problem("the stored dependencies name tasks that do "
                                               "not exist (a damaged state)")],
                                      source=f"workflow {defn.name!r}")
        kids: list[list[int]] = [[] for _ in range(n)]
        for i, ids in enumerate(self.deps):
            for j in ids:
                if j == i:
                    raise DefinitionError([Problem("the stored dependencies name the task "
                                                   "itself (a damaged state)",
                                                   task=self.names[i])],
                                          source=f"workflow {defn.name!r}")
                kids[j].append(i)
        self.need = list(map(len, self.deps))
        self.slack = [0] * n
        fields = cols.fields
        for i, policy in zip(*fields.get("dep_policy", ((), ())), strict=True):
            if policy != "all":
                self.need[i] = self._need(self.names[i], policy, self.deps[i], problems)
                self.slack[i] = len(self.deps[i]) - self.need[i]
        self.queue = [defn.default_queue] * n
        for i, queue in zip(*fields.get("queue", ((), ())), strict=True):
            self.queue[i] = queue or defn.default_queue
        if defn.priority is not None or "priority" in fields:  # bands: dagq.core.priority
            self.queue = banded(self.queue, zip(*fields.get("priority", ((), ())), strict=True),
                                defn.priority)
        self.timeout = [defn.default_task_timeout_s] * n
        for i, timeout in zip(*fields.get("timeout_s", ((), ())), strict=True):
            if timeout is not None:
                self.timeout[i] = timeout
        self.delay = [0.0] * n
        for i, delay in zip(*fields.get("delay_s", ((), ())), strict=True):
            self.delay[i] = float(delay)
        self.condition = [None] * n
        for i, condition in zip(*fields.get("condition", ((), ())), strict=True):
            self.condition[i] = condition
        self.kind = bytearray(n)
        for i, child in zip(*fields.get("workflow", ((), ())), strict=True):
            if child is not None:
                self.kind[i] = KIND_CHILD
        for i, merge in zip(*fields.get("merge", ((), ())), strict=True):
            if merge:
                self.kind[i] = KIND_MERGE
        return kids

    def _map_specs(self, problems: list[Problem]) -> None:
        """Parse the ``map`` of each map head (``self.maps`` holds the raw fields)."""
        for i, value in list(self.maps.items()):
            try:
                self.maps[i] = map_spec(value)
            except ValueError as exc:
                problems.append(Problem(str(exc), task=self.names[i], field="map"))
                del self.maps[i]
        for h in self.maps:
            for k in self.children[h]:
                if self.need[k] > len(self.deps[k]):
                    self.slack[k] = 0  # any failure before the expansion ends it

    def spec(self, i: int) -> TaskDef:
        """The definition of task ``i`` (an instance's is its map head's)."""
        n = self.n_static
        if i < n:
            return self.tasks[i]
        h = self.head[i - n]
        spec = self.specs.get(h)
        if spec is None:  # every instance's message needs it: decode it once
            spec = self.specs[h] = self.tasks[h]
        return spec

    def copy(self) -> Graph:
        """A copy this state may expand (the compiled graph is shared between states)."""
        g = object.__new__(Graph)
        for name in self.__slots__:
            value = getattr(self, name)
            if isinstance(value, list | dict | bytearray):
                value = value.copy()
            setattr(g, name, value)
        g.owned = True
        return g

    def expand(self, h: int, count: int) -> int:
        """Add ``count`` instances of map head ``h`` (the graph must be ``owned``): each
        runs at once, and the tasks that depended on ``h`` depend on every instance
        instead. Returns the index of the first instance."""
        assert self.owned, "expand a copy (Graph.copy), never the shared graph"
        start = len(self.names)
        head = self.names[h]
        names = [instance_name(head, j) for j in range(count)]
        self.names = self.names + tuple(names)
        self.index.update(zip(names, range(start, start + count), strict=True))
        kids = self.children[h]
        self.children[h] = ()
        self.children.extend([kids] * count)
        self.deps.extend([()] * count)
        self.need.extend([0] * count)
        self.slack.extend([0] * count)
        self.queue.extend([self.queue[h]] * count)
        self.timeout.extend([self.timeout[h]] * count)
        self.delay.extend([self.delay[h]] * count)
        self.condition.extend([None] * count)
        self.kind.extend(bytes([self.kind[h]]) * count)
        self.sink.extend(bytes([self.sink[h]]) * count)
        if self.sink[h]:
            self.sink[h] = 0
            self.n_sinks += count - 1
        self.head.extend([h] * count)
        self.pos.extend(range(count))
        self.starts[h] = start
        ids = tuple(range(start, start + count))
        for k in kids:
            deps = tuple(x for d in self.deps[k] for x in (ids if d == h else (d,)))
            self.deps[k] = deps
            policy = self.spec(k).dep_policy
            if policy == "all":
                need = len(deps)
            elif policy == "any":
                need = min(1, len(deps))
            else:
                need = int(policy)
            self.need[k] = need
            self.slack[k] = len(deps) - need  # negative: the policy can never be met
        return start

    def head_of(self, i: int) -> int:
        """The map head of instance ``i``; -1 for a task of the definition."""
        return self.head[i - self.n_static] if i >= self.n_static else -1

    def _need(self, task: str, policy: Any, ids: tuple[int, ...],
              problems: list[Problem]) -> int:
        if isinstance(policy, int) and not isinstance(policy, bool) and policy >= 1 and any(
                d in self.maps for d in ids):
            return policy  # counts the instances of a mapped dependency: known at run time
        deps = len(ids)
        try:
            return required_successes(policy, deps)
        except ValueError as exc:
            problems.append(Problem(str(exc), task=task, field="dep_policy"))
            return deps

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

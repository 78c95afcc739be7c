"""Graph transforms and algorithms on workflow definitions.

``sequentialize_fan_in`` bounds the number of direct dependencies of every task by
putting merge nodes between a wide fan-in and its task; ``real_upstream_tasks`` sees
through them. The graph helpers (strongly connected components, a cycle through a
node) are iterative so that definitions with 100,000 tasks never hit recursion limits.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import replace

from dagq.core.model import MERGE_PREFIX, TaskDef, WorkflowDef
from dagq.errors import DefinitionError, Problem


def merge_node_name(task: str, batch: int) -> str:
    """Name of merge node ``batch`` (0-based) in front of ``task``."""
    return f"{MERGE_PREFIX}{task}_{batch}"


def sequentialize_fan_in(defn: WorkflowDef, max_fan_in: int) -> WorkflowDef:
    """Rewrite every task with more than ``max_fan_in`` dependencies behind merge nodes.

    The dependencies of such a task T are cut, in order, into batches of at most
    ``max_fan_in``. Merge node ``__merge_T_k`` depends on batch k and on merge node
    k-1; T then depends on the last merge node only. Merge nodes are completed by the
    engine itself, so the outcome of T is the same as before (its policy must be
    ``all``). Merge nodes are inserted right before T. Inline sub-workflows are
    transformed too. Raises ``DefinitionError`` naming every task that cannot be
    rewritten: one with a condition (its inputs would no longer be direct) or with a
    dep_policy other than ``all`` (merge nodes can only express "all of these").
    """
    if isinstance(max_fan_in, bool) or not isinstance(max_fan_in, int) or max_fan_in < 1:
        raise ValueError(f"max_fan_in must be an integer of at least 1, got {max_fan_in!r}")
    problems: list[Problem] = []
    tasks: list[TaskDef] = []
    changed = False
    for i, task in enumerate(defn.tasks):
        sub = task.workflow
        if sub is not None and sub.definition is not None:
            try:
                child = sequentialize_fan_in(sub.definition, max_fan_in)
            except DefinitionError as exc:
                problems.extend(nested_problem(p, task.name, f"tasks[{i}].workflow.")
                                for p in exc.problems)
            else:
                if child is not sub.definition:
                    task = replace(task, workflow=replace(sub, definition=child))
                    changed = True
        deps = task.depends_on
        if task.merge or len(deps) <= max_fan_in:
            tasks.append(task)
            continue
        why = _cannot_rewrite(task, max_fan_in)
        if why:
            problems.append(Problem(why, task=task.name, field=f"tasks[{i}].depends_on"))
            continue
        previous: str | None = None
        for k, start in enumerate(range(0, len(deps), max_fan_in)):
            batch = tuple(deps[start:start + max_fan_in])
            name = merge_node_name(task.name, k)
            tasks.append(TaskDef(name=name, depends_on=batch + ((previous,) if previous else ()),
                                 merge=True))
            previous = name
        assert previous is not None
        tasks.append(replace(task, depends_on=(previous,)))
        changed = True
    if problems:
        raise DefinitionError(problems)
    return replace(defn, tasks=tuple(tasks)) if changed else defn


def _cannot_rewrite(task: TaskDef, max_fan_in: int) -> str | None:
    many = f"has {len(task.depends_on)} dependencies, more than max_fan_in {max_fan_in}"
    if task.condition is not None:
        return (f"{many}, and a condition: behind merge nodes the condition could not read "
                "its inputs; remove the condition or raise max_fan_in")
    if task.dep_policy != "all":
        return (f"{many}, and dep_policy {task.dep_policy!r}: the fan-in transform only "
                "preserves dep_policy 'all' (a merge node waits for all of its batch); "
                "use 'all' or raise max_fan_in")
    return None


def nested_problem(problem: Problem, task: str | None, prefix: str = "") -> Problem:
    """``problem`` of a sub-workflow as a problem of its parent ``task``."""
    inner = f"task {problem.task!r} of the sub-workflow: " if problem.task else "sub-workflow: "
    return Problem(inner + problem.message, task=task, field=prefix + (problem.field or ""),
                   line=problem.line, column=problem.column)


def real_upstream_tasks(defn: WorkflowDef, task: str) -> list[str]:
    """The dependencies of ``task`` with merge nodes replaced by the tasks behind them.

    For a task rewritten by :func:`sequentialize_fan_in` this is its original
    ``depends_on``, in the same order. Raises ``KeyError`` if there is no such task.
    """
    by_name = {t.name: t for t in defn.tasks}
    target = by_name[task]
    result: list[str] = []
    seen: set[str] = set()
    expanded = {task}
    stack = _in_order(target, by_name)
    while stack:
        name = stack.pop()
        node = by_name.get(name)
        if node is not None and node.merge:
            if name not in expanded:
                expanded.add(name)
                stack.extend(_in_order(node, by_name))
        elif name not in seen:
            seen.add(name)
            result.append(name)
    return result


def _in_order(task: TaskDef, by_name: dict[str, TaskDef]) -> list[str]:
    """Dependencies of ``task`` reversed for a stack, earlier batches first for merges."""
    deps = list(task.depends_on)
    if task.merge:  # the previous merge node stands for the earlier batches
        deps = ([d for d in deps if _is_merge(by_name.get(d))]
                + [d for d in deps if not _is_merge(by_name.get(d))])
    return deps[::-1]


def _is_merge(task: TaskDef | None) -> bool:
    return task is not None and task.merge


def strongly_connected(adjacency: Sequence[Sequence[int]]) -> list[list[int]]:
    """Strongly connected components with more than one node (iterative Tarjan).

    ``adjacency[v]`` lists the successors of node ``v``. Components come in reverse
    topological order; each lists its nodes in the order they were closed.
    """
    n = len(adjacency)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    components: list[list[int]] = []
    counter = 0
    for root in range(n):
        if index[root] != -1:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        work = [(root, 0)]
        while work:
            v, i = work[-1]
            successors = adjacency[v]
            if i < len(successors):
                work[-1] = (v, i + 1)
                w = successors[i]
                if index[w] == -1:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, 0))
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
                continue
            work.pop()
            if work and low[v] < low[work[-1][0]]:
                low[work[-1][0]] = low[v]
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    components.append(component)
    return components


def cycle_through(start: int, adjacency: Sequence[Sequence[int]], members: set[int]) -> list[int]:
    """A shortest cycle ``[start, ..., start]`` inside ``members`` (breadth-first search).

    ``members`` must be a strongly connected set containing ``start``.
    """
    parent: dict[int, int] = {start: start}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in adjacency[v]:
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if w in members and w not in parent:
                parent[w] = v
                queue.append(w)
    raise ValueError(f"node {start} is on no cycle inside the given members")

"""Semantic validation of a workflow definition: every problem at once.

``validate`` works on the model, so it checks definitions built in Python as well as
parsed ones. The parser (``dagq.core.parse``) calls :func:`check` with a
:class:`SourceMap` so that field paths match the source file and problems it already
reported (such as a missing name) are not reported twice.
"""

from __future__ import annotations

import difflib
import math
import re
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from dagq.core import hardening, hooks
from dagq.core.caching import spec_problems as cache_problems
from dagq.core.concurrency import sharing_problems
from dagq.core.condition import cached_condition
from dagq.core.mapping import task_map_problems
from dagq.core.model import SubWorkflow, TaskDef, WorkflowDef
from dagq.core.name_rules import storage_name_problems
from dagq.core.params import definition_problems
from dagq.core.rules import (
    describe,
    json_problems,
    plain_json,
    queue_problem,
    task_name_problem,
)
from dagq.core.simple_tasks import simple_tasks
from dagq.core.task_checks import kwargs_problems, task_problems, workflow_problems
from dagq.core.transforms import cycle_through, nested_problem, strongly_connected
from dagq.errors import ConditionError, Problem

MAX_SUBWORKFLOW_DEPTH = 16
"""Deepest nesting of inline sub-workflow definitions."""
_FACTORY_RE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
"""Shape of a sub-workflow factory: ``package.module:function``."""
_RESULT_POLICIES = ("all_sinks_succeed", "all_tasks_succeed")
Where = str | tuple[int, str]
"""A field path, or ``(task index, field)`` turned into a path only when needed."""
_SUGGEST_LIMIT = 20  # unknown-dependency suggestions are O(tasks) each; cap them


@dataclass
class SourceMap:
    """How a parsed definition maps back to its source (built by the parser)."""

    task_index: Sequence[int] | None = None
    """Source index of each task of the model (``None``: the same index)."""
    skip: set[tuple[int, str]] = field(default_factory=set)
    """``(task index or -1 for the workflow, field)`` pairs the parser already reported."""
    children: dict[int, SourceMap] = field(default_factory=dict)
    """Source maps of inline sub-workflows, by model task index."""


_TRUSTED: deque[weakref.ref[WorkflowDef]] = deque(maxlen=4)
"""The last definitions found valid: checking one of them again (the loader checks a
file, then ``submit`` checks what it is given) returns at once. Definitions are
immutable values, so a definition valid once stays valid."""


def validate(defn: WorkflowDef) -> list[Problem]:
    """Every problem of ``defn`` (empty when it is valid); never raises."""
    if any(ref() is defn for ref in _TRUSTED):
        return []
    return check(defn, SourceMap())


def check(defn: WorkflowDef, source: SourceMap, prefix: str = "", depth: int = 0) -> list[Problem]:
    """Problems of ``defn``; field paths start with ``prefix`` (used for sub-workflows)."""
    tasks = defn.tasks if isinstance(defn.tasks, list | tuple) else ()
    checker = _Checker(defn, source, prefix, depth, simple_tasks(tasks))
    # values no part of dagq can carry are reported alone: the checks below assume text
    # encodes and numbers convert
    unusable = hardening.definition_problems(defn, lambda i: checker.path(i, ""), prefix,
                                             checker.simple)
    problems = [hardening.printable(p) for p in unusable or checker.run()]
    if not problems and not prefix and not depth and isinstance(defn, WorkflowDef):
        _TRUSTED.append(weakref.ref(defn))
    return problems


def _known_ids(deps: Sequence[str], index: Mapping[str, int]) -> tuple[list[int] | None, int]:
    """The ids of ``deps`` and the highest one, when every name is known and distinct;
    ``(None, -1)`` otherwise (the full dependency check then says what is wrong)."""
    found = [index.get(d) for d in deps]
    if None in found or (len(deps) > 1 and len(set(deps)) != len(deps)):
        return None, -1
    ids = cast(list[int], found)
    return ids, max(ids, default=-1)


def _last(where: Where) -> str:
    return where[1] if isinstance(where, tuple) else where.rsplit(".", 1)[-1]


def _suggest(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


class _Checker:
    def __init__(self, defn: WorkflowDef, source: SourceMap, prefix: str, depth: int,
                 simple: bytearray) -> None:
        self.defn = defn
        self.simple = simple
        """Flags of the tasks ``simple_tasks`` found valid on their own."""
        self.source = source
        self.prefix = prefix
        self.depth = depth
        self.problems: list[Problem] = []
        self.suggestions = 0
        tasks = defn.tasks if isinstance(defn.tasks, list | tuple) else ()
        self.mapped = {t.name for t in tasks if isinstance(t, TaskDef) and t.map is not None}
        """Names of the mapped tasks (an integer dep_policy after one counts instances)."""

    def add(self, message: str, where: Where | None, task: object = None) -> None:
        """Record a problem; ``where`` is a path or ``(task index, field)``."""
        if isinstance(where, tuple):
            where = self.path(*where)
        name = task if isinstance(task, str) and task else None
        self.problems.append(Problem(message, task=name, field=where))

    def path(self, index: int, name: str) -> str:
        src = self.source.task_index[index] if self.source.task_index is not None else index
        return f"{self.prefix}tasks[{src}].{name}" if name else f"{self.prefix}tasks[{src}]"

    def run(self) -> list[Problem]:
        self.check_workflow()
        tasks = self.defn.tasks
        if not isinstance(tasks, list | tuple):
            if (-1, "tasks") not in self.source.skip:
                self.add(f"tasks must be a list of tasks, got {describe(tasks)}",
                         self.prefix + "tasks")
            return self.problems
        if not tasks and (-1, "tasks") not in self.source.skip:
            self.add("a workflow needs at least one task", self.prefix + "tasks")
        good = [(i, t) for i, t in enumerate(tasks) if isinstance(t, TaskDef)]
        for i, t in enumerate(tasks):
            if not isinstance(t, TaskDef):
                self.add(f"expected a TaskDef, got {describe(t)}", (i, ""))
        simple = self.simple
        for i, t in good:
            if not simple[i]:
                self.check_task(i, t)
        self.check_graph(good)
        for message, where, task in storage_name_problems(self.defn, self.prefix, simple):
            self.add(message, where, task)
        for message, index, at in definition_problems(self.defn, simple):
            self.add(message, (index, at) if index is not None else self.prefix + at,
                     getattr(tasks[index], "name", None) if index is not None else None)
        return self.problems

    def check_workflow(self) -> None:
        d, p = self.defn, self.prefix
        bad_name = not isinstance(d.name, str) or not d.name.strip()
        if bad_name and (-1, "name") not in self.source.skip:
            self.add(f"the workflow needs a non-empty name, got {describe(d.name)}", p + "name")
        if (problem := queue_problem(d.default_queue)) is not None:
            self.add(problem, p + "default_queue")
        if d.default_task_timeout_s is not None:
            self.number(d.default_task_timeout_s, p + "default_task_timeout_s", None, True)
        mp = d.max_parallelism
        if mp is not None and (not isinstance(mp, int) or isinstance(mp, bool) or mp < 1):
            self.add(f"max_parallelism must be an integer of at least 1, got {describe(mp)}",
                     p + "max_parallelism")
        if d.result_policy not in _RESULT_POLICIES:
            hint = _suggest(str(d.result_policy), _RESULT_POLICIES)
            self.add(f"result_policy must be one of {', '.join(_RESULT_POLICIES)}, got "
                     f"{describe(d.result_policy)}{hint}", p + "result_policy")
        self.mapping(d.params, p + "params", None)
        for message, at in workflow_problems(d):
            self.add(message, p + at)
        for message, at in cache_problems(d.cache):
            self.add(message, p + at)
        for message, at in sharing_problems(d.concurrency, d.priority):
            self.add(message, p + at)
        for message, at in hooks.problems(d):
            self.add(message, p + at)
        if d.description is not None and not isinstance(d.description, str):
            self.add(f"description must be a string, got {describe(d.description)}",
                     p + "description")

    def number(self, value: object, where: Where, task: object, positive: bool) -> None:
        kind = type(value)
        if (kind is int or (kind is float and math.isfinite(value))) and (  # type: ignore[arg-type]
                value > 0 if positive else value >= 0):  # type: ignore[operator]
            return
        bound = "greater than 0" if positive else "0 or more"
        self.add(f"{_last(where)} must be a number {bound}, got {describe(value)}", where, task)

    def mapping(self, value: object, where: Where, task: object) -> None:
        if not isinstance(value, Mapping):
            self.add(f"{_last(where)} must be a mapping, got {describe(value)}", where, task)
        elif not plain_json(value, 0):
            path = self.path(*where) if isinstance(where, tuple) else where
            for at, message in json_problems(value, path):
                self.add(message, at, task)

    def check_task(self, i: int, t: TaskDef) -> None:
        skip = self.source.skip
        name = t.name
        if not isinstance(t.merge, bool):
            self.add(f"merge must be true or false, got {describe(t.merge)}",
                     (i, "merge"), name)
        if (i, "name") not in skip and (problem := task_name_problem(name, t.merge is True)):
            self.add(problem, (i, "name"), name)
        self.mapping(t.kwargs, (i, "kwargs"), name)
        if isinstance(t.kwargs, Mapping):
            self.check_kwargs(i, t.kwargs, name)
        deps = t.depends_on
        if not isinstance(deps, list | tuple):
            self.add(f"depends_on must be a list of task names, got {describe(deps)}",
                     (i, "depends_on"), name)
        else:
            for k, dep in enumerate(deps):
                if not isinstance(dep, str):
                    self.add(f"dependencies must be task names, got {describe(dep)}",
                             (i, f"depends_on[{k}]"), name)
        if t.queue is not None and (problem := queue_problem(t.queue)) is not None:
            self.add(problem, (i, "queue"), name)
        if not isinstance(t.num_retries, int) or isinstance(t.num_retries, bool) \
                or t.num_retries < 0:
            self.add(f"num_retries must be an integer of 0 or more, got "
                     f"{describe(t.num_retries)}", (i, "num_retries"), name)
        self.number(t.retry_backoff_s, (i, "retry_backoff_s"), name, False)
        self.number(t.retry_backoff_max_s, (i, "retry_backoff_max_s"), name, False)
        self.number(t.delay_s, (i, "delay_s"), name, False)
        if t.timeout_s is not None:
            self.number(t.timeout_s, (i, "timeout_s"), name, True)
        if t.condition is not None and not isinstance(t.condition, str):
            self.add(f"condition must be a string, got {describe(t.condition)}",
                     (i, "condition"), name)
        if t.workflow is not None:
            self.check_subworkflow(i, t)
        if t.map is not None:
            self.check_map(i, t)
        for message, at in cache_problems(t.cache):
            self.add(message, (i, at), name)
        for message, at in sharing_problems(t.concurrency, t.priority, t.map is not None):
            self.add(message, (i, at), name)
        for message, at in task_problems(t, kind=(i, "kind") not in skip):
            self.add(message, (i, at), name)
        if t.merge is True:
            extra = [f for f, v in (("kwargs", t.kwargs), ("condition", t.condition),
                                    ("workflow", t.workflow)) if v]
            if extra or t.dep_policy != "all":
                self.add("merge nodes take only name and depends_on (dep_policy all); "
                         f"remove {', '.join(extra) or 'dep_policy'}", (i, ""), name)

    def check_map(self, i: int, t: TaskDef) -> None:
        """A mapped task: its ``map`` spec, what it maps over, ``{item}`` placements."""
        for message, at in task_map_problems(t, self.defn):
            self.add(message, (i, at), t.name)

    def check_kwargs(self, i: int, kwargs: Mapping[str, object], name: str) -> None:
        for message, at in kwargs_problems(kwargs):
            self.add(message, (i, at), name)

    def check_subworkflow(self, i: int, t: TaskDef) -> None:
        sub, name, where = t.workflow, t.name, (i, "workflow")
        if not isinstance(sub, SubWorkflow):
            self.add(f"workflow must be a SubWorkflow, got {describe(sub)}", where, name)
            return
        if isinstance(t.kwargs, Mapping):
            for key in ("cmd", "call"):
                if key in t.kwargs:
                    self.add(f"a task with 'workflow' runs the child workflow, so kwargs.{key} "
                             "would never run; remove one of them", (i, "kwargs"), name)
        if sub.factory is not None and (sub.definition is not None or sub.path is not None):
            self.add("give only one of an inline definition, a path or a factory", where, name)
        elif sub.definition is None and sub.path is None and sub.factory is None:
            self.add("workflow needs an inline definition, a path or a factory", where, name)
        if sub.path is not None and (not isinstance(sub.path, str) or not sub.path.strip()):
            self.add(f"workflow path must be a non-empty string, got {describe(sub.path)}",
                     where, name)
        if sub.factory is not None and (
                not isinstance(sub.factory, str) or not _FACTORY_RE.fullmatch(sub.factory)):
            self.add(f"factory must look like 'package.module:function', got "
                     f"{describe(sub.factory)}", where, name)
        self.mapping(sub.params, (i, "params"), name)
        child = sub.definition
        if child is None:
            return
        if not isinstance(child, WorkflowDef):
            self.add(f"an inline workflow must be a WorkflowDef, got {describe(child)}",
                     where, name)
        elif self.depth + 1 >= MAX_SUBWORKFLOW_DEPTH:
            self.add(f"sub-workflows are nested more than {MAX_SUBWORKFLOW_DEPTH} deep", where,
                     name)
        else:
            for p in check(child, self.source.children.get(i, SourceMap()),
                           self.path(i, "workflow") + ".",
                           self.depth + 1):
                self.problems.append(nested_problem(p, name if isinstance(name, str) else None))

    def check_graph(self, good: list[tuple[int, TaskDef]]) -> None:
        index: dict[str, int] = {}
        for i, t in good:
            if not isinstance(t.name, str):
                continue
            first = index.setdefault(t.name, i)
            if first != i and (i, "name") not in self.source.skip:
                self.add(f"duplicate task name {t.name!r} (first defined at "
                         f"{self.path(first, '')}); task names must be unique",
                         (i, "name"), t.name)
        adjacency: list[list[int]] = [[] for _ in range(len(self.defn.tasks))]
        ordered = True  # every dependency listed before its task: there can be no cycle
        known: dict[object, tuple[list[int] | None, int]] = {}  # by list of names: their
        for i, t in good:  # ids when all are known and distinct, and the highest id
            deps = t.depends_on if isinstance(t.depends_on, list | tuple) else ()
            if self.simple[i]:  # a tuple of names: looked up once per distinct tuple
                hit = known.get(deps)
                if hit is None:
                    hit = known[deps] = _known_ids(deps, index)
                targets, top = hit
                if targets is not None and t.name not in deps:
                    adjacency[i] = targets
                    ordered = ordered and top < i
                    continue
            seen: set[str] = set()
            for k, dep in enumerate(deps):
                if not isinstance(dep, str):
                    continue
                target = index.get(dep)
                if target is not None and dep != t.name and dep not in seen:
                    seen.add(dep)
                    adjacency[i].append(target)
                    continue
                where = (i, f"depends_on[{k}]")
                if dep in seen:
                    self.add(f"{dep!r} is listed twice in depends_on", where, t.name)
                elif dep == t.name:
                    self.add("a task cannot depend on itself", where, t.name)
                else:
                    self.add(f"depends on unknown task {dep!r}{self.suggest_task(dep, index)}",
                             where, t.name)
                seen.add(dep)
            ordered = ordered and all(target < i for target in adjacency[i])
            if not self.simple[i]:
                self.check_policy(i, t, [d for d in deps if isinstance(d, str)],
                                  isinstance(t.depends_on, list | tuple))
        if ordered:
            return
        names = [t.name if isinstance(t, TaskDef) else "?" for t in self.defn.tasks]
        for component in strongly_connected(adjacency):
            start = min(component)
            cycle = cycle_through(start, adjacency, set(component))
            more = len(component) - len(cycle) + 1
            tail = f"; {more} more task(s) are on cycles with these" if more > 0 else ""
            shown = [str(names[c]) for c in cycle]
            if len(shown) > 12:
                shown = [*shown[:6], f"... ({len(cycle) - 10} more)", *shown[-4:]]
            self.add("dependency cycle: " + " -> ".join(shown)
                     + f" (each task depends on the next){tail}",
                     (start, "depends_on"), names[start])

    def suggest_task(self, dep: str, index: Mapping[str, int]) -> str:
        self.suggestions += 1
        if self.suggestions > _SUGGEST_LIMIT or len(index) > 20_000:
            return ""
        return _suggest(dep, list(index))

    def check_policy(self, i: int, t: TaskDef, deps: list[str], deps_ok: bool) -> None:
        policy, name, where = t.dep_policy, t.name, (i, "dep_policy")
        if isinstance(policy, bool) or not isinstance(policy, int | str):
            self.add(f"dep_policy must be 'all', 'any' or a positive integer, got "
                     f"{describe(policy)}", where, name)
        elif isinstance(policy, str) and policy not in ("all", "any"):
            hint = ("; write the number without quotes" if policy.strip().isdigit()
                    else _suggest(policy, ["all", "any"]))
            self.add(f"dep_policy must be 'all', 'any' or a positive integer, got "
                     f"{policy!r}{hint}", where, name)
        elif isinstance(policy, int) and policy < 1:
            self.add(f"dep_policy must be at least 1, got {policy}", where, name)
        elif isinstance(policy, int) and deps_ok and policy > len(deps) and not any(
                d in self.mapped for d in deps):
            self.add(f"dep_policy {policy} can never be met: the task has only {len(deps)} "
                     "dependencies", where, name)
        cond = t.condition
        if not isinstance(cond, str) or not deps_ok:
            return
        where = (i, "condition")
        try:
            compiled = cached_condition(cond)
        except ConditionError as exc:
            self.add(f"invalid condition: {exc}", where, name)
            return
        if not deps:
            self.add("a condition needs dependencies: it is evaluated on the outputs of "
                     "depends_on, and this task has none", where, name)
            return
        for message in compiled.unknown_references(deps):
            self.add(message, where, name)

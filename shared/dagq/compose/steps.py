"""The building blocks of the Python workflow builder and their compilation to tasks.

Compilation walks the steps with an explicit stack (no recursion limit on nesting) and
shares one dependency tuple between all first tasks of a step, so a group of N tasks
costs O(N) time and memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeAlias

from dagq.compose.callables import is_finite_number
from dagq.core.model import SubWorkflow, TaskDef
from dagq.errors import DefinitionError, Problem


@dataclass(eq=False)
class Task:
    """One task of a workflow being built; make it with ``dagq.compose.builder.task``.

    Without an explicit ``name``, building the workflow derives an unused one from
    ``base`` (a function's name, or ``task``).
    """

    name: str | None
    """The explicit name, or None for an automatic one."""
    kwargs: dict[str, Any]
    """What the worker needs (``cmd`` or ``call``/``args``, ``env``, ``cwd``, ...)."""
    base: str = "task"
    """Stem of the automatic name."""
    options: dict[str, Any] = field(default_factory=dict)
    """Other ``TaskDef`` fields (queue, retries, timeout, delay, condition, dep_policy)."""
    depends_on: tuple[str, ...] = ()
    """Extra dependencies by name, on top of those the composition implies."""
    workflow: SubWorkflow | None = None
    """Set for a task that runs a child workflow."""

    def map(self, over: str, *, max_items: int | None = None,
            max_parallelism: int | None = None) -> Task:
        """Run one instance of this task per item of the list at ``over`` (e.g.
        ``"inputs.scan.files"`` or ``"params.files"``); see ``dagq.core.mapping``.
        The function gets the item through a parameter named ``item``; a command
        through ``{item}``. Returns the task, so ``chain(scan, task(fit).map(...))``."""
        spec: dict[str, Any] = {"over": over}
        if max_items is not None:
            spec["max_items"] = max_items
        if max_parallelism is not None:
            spec["max_parallelism"] = max_parallelism
        self.options["map"] = spec
        return self


class Chain:
    """Steps run one after another: every first task of a step waits for every last
    task of the step before it."""

    def __init__(self, *steps: Step | Callable[..., Any]) -> None:
        self.steps: tuple[Step, ...] = as_steps(steps, "Chain")


class Group:
    """Steps run side by side; whatever follows the group waits for all of them."""

    def __init__(self, *steps: Step | Callable[..., Any]) -> None:
        self.steps: tuple[Step, ...] = as_steps(steps, "Group")


class WithDelay:
    """``step`` whose first tasks wait an extra delay once they are ready.

    Give the delay with its unit: ``delay_s=30`` (seconds), ``delay_ms=30_000``
    (milliseconds, as dramatiq-workflow's ``WithDelay(..., delay=30_000)``) or
    ``delay=timedelta(seconds=30)``. A bare number for ``delay=`` is refused: it means
    milliseconds in dramatiq-workflow, so guessing either way would be a trap.
    The delay adds to the tasks' own ``delay_s`` and to enclosing ``WithDelay``s.
    """

    def __init__(self, step: Step | Callable[..., Any], *, delay: timedelta | None = None,
                 delay_s: float | None = None, delay_ms: float | None = None) -> None:
        self.steps: tuple[Step, ...] = as_steps((step,), "WithDelay")
        self.delay = _delay_seconds(delay, delay_s, delay_ms)
        """The delay in seconds."""


def _delay_seconds(delay: object, delay_s: object, delay_ms: object) -> float:
    given = [(k, v) for k, v in (("delay", delay), ("delay_s", delay_s), ("delay_ms", delay_ms))
             if v is not None]
    if len(given) != 1:
        raise _fail("WithDelay() needs exactly one of delay_s= (seconds), delay_ms= "
                    "(milliseconds) or delay= (a datetime.timedelta), got "
                    + (", ".join(k for k, _ in given) or "none"))
    key, value = given[0]
    if key == "delay":
        if not isinstance(value, timedelta):
            raise _fail(f"WithDelay(delay={value!r}): a bare number has no unit here "
                        "(dramatiq-workflow reads it as milliseconds); write "
                        f"delay_ms={value!r}, delay_s=... (seconds) or "
                        "delay=timedelta(seconds=...)")
        seconds = value.total_seconds()
    elif not is_finite_number(value):
        raise _fail(f"WithDelay({key}=...) must be a number, got {value!r}")
    else:
        seconds = float(value) / (1000.0 if key == "delay_ms" else 1.0)  # type: ignore[arg-type]
    if seconds < 0:
        raise _fail(f"WithDelay({key}=...) must not be negative, got {value!r}")
    return seconds


def _fail(message: str) -> DefinitionError:
    return DefinitionError([Problem(message)])


Step: TypeAlias = Task | Chain | Group | WithDelay
"""Anything that can appear in a workflow: a task or a composition of steps."""


def as_steps(items: Iterable[Step | Callable[..., Any]], what: str) -> tuple[Step, ...]:
    """``items`` as steps (plain functions become ``task(fn)``); at least one."""
    out: list[Step] = []
    for item in items:
        if isinstance(item, Task | Chain | Group | WithDelay):
            out.append(item)
        elif callable(item):
            from dagq.compose import task

            out.append(task(item))
        else:
            raise TypeError(f"{what}() takes tasks, functions, Chain, Group or WithDelay; "
                            f"got {item!r}")
    if not out:
        raise DefinitionError([Problem(f"{what}() needs at least one step")])
    return tuple(out)


@dataclass
class _Frame:
    step: Step
    preds: tuple[str, ...]
    """Dependencies of this step's first tasks."""
    next_child: int = 0
    entries: list[int] = field(default_factory=list)
    sinks: list[str] = field(default_factory=list)


def compile_steps(steps: tuple[Step, ...]) -> list[TaskDef]:
    """The tasks of ``steps`` (side by side) in definition order with their dependencies."""
    order = _tasks_in_order(steps)
    names = _assign_names(order)
    nodes: list[tuple[Task, tuple[str, ...]]] = []
    delays: list[float] = []
    stack = [_Frame(Group(*steps), ())]
    result: tuple[list[int], list[str]] | None = None
    while stack:
        f = stack[-1]
        step = f.step
        if isinstance(step, Task):
            nodes.append((step, _deps(f.preds, step.depends_on)))
            delays.append(0.0)
            result = ([len(nodes) - 1], [names[id(step)]])
            stack.pop()
            continue
        if result is not None:  # a child of f has just been compiled
            entries, sinks = result
            result = None
            if isinstance(step, Chain):
                if f.next_child == 1:
                    f.entries = entries
                f.preds, f.sinks = tuple(sinks), sinks
            else:
                f.entries.extend(entries)
                f.sinks.extend(sinks)
        if f.next_child < len(step.steps):
            stack.append(_Frame(step.steps[f.next_child], f.preds))
            f.next_child += 1
            continue
        if isinstance(step, WithDelay):
            for i in f.entries:
                delays[i] += step.delay
        result = (f.entries, f.sinks)
        stack.pop()
    return [_task_def(t, names[id(t)], deps, extra)
            for (t, deps), extra in zip(nodes, delays, strict=True)]


def _deps(preds: tuple[str, ...], own: tuple[str, ...]) -> tuple[str, ...]:
    if not own:
        return preds  # shared, not copied: keeps wide groups O(N)
    seen = set(preds)
    return preds + tuple(d for d in dict.fromkeys(own) if d not in seen)


def _task_def(t: Task, name: str, deps: tuple[str, ...], extra_delay: float) -> TaskDef:
    options = dict(t.options)
    if extra_delay:
        options["delay_s"] = float(options.get("delay_s", 0.0)) + extra_delay
    return TaskDef(name=name, kwargs=t.kwargs, depends_on=deps, workflow=t.workflow,
                   **options)


def _tasks_in_order(steps: tuple[Step, ...]) -> list[Task]:
    """Every task in definition order; the same ``Task`` object twice is an error."""
    out: list[Task] = []
    seen: set[int] = set()
    stack: list[Step] = list(reversed(steps))
    while stack:
        step = stack.pop()
        if isinstance(step, Task):
            if id(step) in seen:
                label = repr(step.name) if step.name else f"({step.base})"
                raise DefinitionError([Problem(
                    f"task {label} is used twice in the workflow; each use is its own "
                    "task, so create one task() per use", task=step.name)])
            seen.add(id(step))
            out.append(step)
        else:
            stack.extend(reversed(step.steps))
    return out


def _assign_names(order: list[Task]) -> dict[int, str]:
    """Explicit names (unique) and automatic ones: ``base`` when a base is used once,
    else ``base_1``, ``base_2``, ... skipping names already taken."""
    names: dict[int, str] = {}
    taken: set[str] = set()
    for t in order:
        if t.name is not None:
            if t.name in taken:
                raise DefinitionError([Problem(
                    f"two tasks are named {t.name!r}; task names must be unique (leave the "
                    "name out to get an automatic one)", task=t.name)])
            taken.add(t.name)
            names[id(t)] = t.name
    unnamed = [t for t in order if t.name is None]
    counts = Counter(t.base for t in unnamed)
    counters: Counter[str] = Counter()
    for t in unnamed:
        name = t.base
        if counts[t.base] > 1 or name in taken:
            while True:
                counters[t.base] += 1
                name = f"{t.base}_{counters[t.base]}"
                if name not in taken:
                    break
        taken.add(name)
        names[id(t)] = name
    return names

"""Mapped tasks: one instance of a task per item of a list known only at run time.

A task with ``map: {over: inputs.scan.files}`` (or ``over: params.files``) is a *map
head*. When its dependencies allow it to run (and its condition holds), the engine reads
the list at ``over`` and adds one task per item, named ``NAME[0]``, ``NAME[1]``, ...;
each instance has its own attempts, retries, logs and output, and sees its item as
``{item}`` (``{item.FIELD}`` for a field of an object) in its ``kwargs``, as
``$DAGQ_ITEM`` and as ``dagq.task.get_item()``. A task depending on the head depends on
every instance instead (its ``dep_policy`` counts instances) and reads their outputs as
one list, ``inputs.NAME``, in item order.

This module holds the pure parts: the ``map`` spec, the ``over`` path, reading the items,
instance names, and ``{item}`` placeholders. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dagq.core.model import MappedOutputs, OutputRef, TaskDef, WorkflowDef
from dagq.core.params import cmd_problems
from dagq.core.rules import describe

MAX_ITEMS = 100_000
"""Default cap on the items of one map (``map.max_items`` raises it)."""
MAX_ITEMS_LIMIT = 1_000_000
"""The highest ``map.max_items`` accepted: every instance is a row of the state."""
MAX_ITEM_BYTES = 16 * 1024
"""Largest item (as JSON): an item travels in every task message of its instance."""
SPEC_KEYS = ("over", "max_items", "max_parallelism")
ITEM_ENV = "DAGQ_ITEM"
"""Environment variable holding an instance's item (text as is, other values as JSON)."""
ITEM_JSON_ENV = "DAGQ_ITEM_JSON"
"""Environment variable holding an instance's item as JSON (``dagq.task.get_item``)."""
ITEM_PARAMETER = "item"
"""A function task whose function takes a parameter of this name gets its item there."""

_OVER_RE = re.compile(r"(inputs|params)((?:\.[A-Za-z_][\w-]*|\[(?:-?\d+|\"[^\"\\]*\")\])+)")
_STEP_RE = re.compile(r"\.([A-Za-z_][\w-]*)|\[(-?\d+)\]|\[\"([^\"\\]*)\"\]")
_INSTANCE_RE = re.compile(r"(.+)\[(\d+)\]")
ITEM_RE = re.compile(r"\{\{item((?:\.[A-Za-z_]\w*)*)\}\}|\{item((?:\.[A-Za-z_]\w*)*)\}")
"""``{{item...}}`` (group 1: the literal text ``{item...}``) or ``{item}`` / ``{item.a.b}``."""
ITEM_PARAM = "__dagq_item"
"""The parameter name ``{item}`` is rendered through (``dagq.core.params`` quoting)."""


def _step(value: Any, step: str | int, where: str) -> Any:
    """``value[step]`` for one step of an ``over`` path; ``MapError`` if it is not there."""
    if isinstance(step, str):
        if isinstance(value, Mapping) and step in value:
            return value[step]
        fields = ", ".join(map(str, list(value)[:10])) if isinstance(value, Mapping) else ""
        known = f" (its fields: {fields})" if fields else ""
        raise MapError(f"map over {where}: {describe(value)} has no field {step!r}{known}")
    if isinstance(value, list) and -len(value) <= step < len(value):
        return value[step]
    raise MapError(f"map over {where}: {describe(value)} has no index {step}")


def _small(item: Any) -> bool:
    """True for an item that is surely within ``MAX_ITEM_BYTES`` without encoding it."""
    if item is None or isinstance(item, bool | int | float):
        return not isinstance(item, int) or abs(item) < 10 ** 1000
    return isinstance(item, str) and len(item) * 12 + 2 <= MAX_ITEM_BYTES


class MapError(ValueError):
    """Raised when a map's items cannot be read (the head task fails with the message)."""


@dataclass(frozen=True, slots=True)
class MapSpec:
    """A parsed ``map`` field."""

    over: str
    """The path as written, e.g. ``inputs.scan.files``."""
    source: str
    """``inputs`` or ``params``."""
    name: str
    """The dependency or parameter the list is read from."""
    path: tuple[str | int, ...]
    """Fields and indexes into that value."""
    max_items: int = MAX_ITEMS
    """More items than this fail the head task."""
    max_parallelism: int | None = None
    """Instances of this map running at once (``None``: no cap of its own)."""


def parse_over(text: object) -> tuple[str, str, tuple[str | int, ...]]:
    """``(source, name, path)`` of an ``over`` path; ``ValueError`` saying what is wrong."""
    match = _OVER_RE.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"map.over must be a path like inputs.scan.files, "
                         f'inputs["scan-1"].rows or params.files, got {describe(text)}')
    source = match.group(1)
    steps: list[str | int] = []
    for m in _STEP_RE.finditer(match.group(2)):
        field, index, quoted = m.groups()
        steps.append(field if field is not None else int(index) if index is not None
                     else quoted)
    if not steps or not isinstance(steps[0], str):
        raise ValueError(f"map.over must name a dependency or parameter after "
                         f"{source}., got {describe(text)}")
    return source, steps[0], tuple(steps[1:])


def map_spec(value: object) -> MapSpec:
    """The ``MapSpec`` of a ``map`` field; ``ValueError`` naming the first problem."""
    for message, _ in spec_problems(value):
        raise ValueError(message)
    assert isinstance(value, Mapping)
    source, name, path = parse_over(value["over"])
    return MapSpec(str(value["over"]).strip(), source, name, path,
                   int(value.get("max_items", MAX_ITEMS)), value.get("max_parallelism"))


def spec_problems(value: object) -> Iterator[tuple[str, str]]:
    """``(message, field)`` for each problem of a ``map`` field on its own."""
    if not isinstance(value, Mapping):
        yield (f"map must be a mapping like {{over: inputs.scan.files}}, got "
               f"{describe(value)}"), "map"
        return
    for key in value:
        if key not in SPEC_KEYS:
            yield f"map has unknown key {key!r}; allowed: {', '.join(SPEC_KEYS)}", f"map.{key}"
    if "over" not in value:
        yield "map needs 'over', the list to map over (e.g. over: inputs.scan.files)", "map"
    else:
        try:
            parse_over(value["over"])
        except ValueError as exc:
            yield str(exc), "map.over"
    for key, low, high in (("max_items", 0, MAX_ITEMS_LIMIT),
                           ("max_parallelism", 1, MAX_ITEMS_LIMIT)):
        if key in value and value[key] is not None:
            n = value[key]
            if type(n) is not int or not low <= n <= high:
                yield (f"map.{key} must be an integer from {low} to {high:,}, got "
                       f"{describe(n)}"), f"map.{key}"


def read_items(spec: MapSpec, inputs: Mapping[str, Any], params: Mapping[str, Any],
               resolve: Callable[[OutputRef], Any] | None) -> list[Any]:
    """The items ``spec`` maps over; ``MapError`` saying why they cannot be read."""
    where = spec.over
    if spec.source == "params":
        if spec.name not in params:
            raise MapError(f"map over {where}: the run has no parameter {spec.name!r}")
        value = params[spec.name]
    else:
        if spec.name not in inputs:
            raise MapError(f"map over {where}: {spec.name!r} produced no output (it did not "
                           "complete)")
        value = inputs[spec.name]
        if isinstance(value, OutputRef):
            if resolve is None:
                raise MapError(f"map over {where}: the output of {spec.name!r} is in output "
                               "storage and cannot be read here")
            try:
                value = resolve(value)
            except Exception as exc:
                raise MapError(f"map over {where}: could not read the output of "
                               f"{spec.name!r}: {exc}") from exc
        elif type(value) is MappedOutputs:
            value = [resolve(v) if isinstance(v, OutputRef) and resolve else v for v in value]
    for step in spec.path:
        value = _step(value, step, where)
    if not isinstance(value, list):
        raise MapError(f"map over {where}: expected a list, got {describe(value)}")
    if len(value) > spec.max_items:
        raise MapError(f"map over {where}: {len(value):,} items, more than max_items "
                       f"({spec.max_items:,}); raise map.max_items (up to "
                       f"{MAX_ITEMS_LIMIT:,}) or split the list")
    for j, item in enumerate(value):
        if _small(item):
            continue
        size = len(json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode())
        if size > MAX_ITEM_BYTES:
            raise MapError(f"map over {where}: item {j} is {size:,} bytes of JSON, more than "
                           f"{MAX_ITEM_BYTES:,}; map over names or ids and read the data in "
                           "the task")
    return list(value)


def instance_name(head: str, position: int) -> str:
    """The name of instance ``position`` of map head ``head``: ``head[position]``."""
    return f"{head}[{position}]"


def split_instance(name: str) -> tuple[str, int] | None:
    """``(head, position)`` if ``name`` looks like an instance name, else None."""
    m = _INSTANCE_RE.fullmatch(name)
    return (m.group(1), int(m.group(2))) if m else None


def item_text(item: Any) -> str:
    """An item as the text of ``$DAGQ_ITEM`` and ``{item}``: a string as it is, any
    other value as compact JSON."""
    return item if isinstance(item, str) else json.dumps(item, separators=(",", ":"),
                                                         ensure_ascii=False)


RENDERED = ("cmd", "env", "cwd", "args")
"""The ``kwargs`` keys ``render_kwargs`` writes parameters into; ``{item}`` elsewhere
(``bg_dirsync_to``, a plugin's keys) becomes the item's plain text."""


def with_item(kwargs: Mapping[str, Any], item: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``kwargs`` with each ``{item}`` / ``{item.FIELD}`` turned into a parameter
    reference, and those parameters' values: ``dagq.core.params.render_kwargs`` then
    writes them with the same quoting as parameters (in the other keys the item's text
    is written as it is). ``ValueError`` for a field the item lacks."""
    values: dict[str, Any] = {}

    def value_at(path: str) -> Any:
        value = item
        for field in path.split(".")[1:]:
            if not isinstance(value, Mapping) or field not in value:
                raise ValueError(f"{{item{path}}}: the item {describe(item)} has no field "
                                 f"{field!r}")
            value = value[field]
        return value

    def one(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return "{item" + match.group(1) + "}"
        path = match.group(2)
        name = ITEM_PARAM + path.replace(".", "__")
        values[name] = value_at(path)
        return "{params." + name + "}"

    def plain(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return "{item" + match.group(1) + "}"
        return item_text(value_at(match.group(2)))

    out = {k: _rewrite(v, one if k in RENDERED else plain) for k, v in kwargs.items()}
    return out, values


def template_refs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` with ``{item...}`` turned into parameter references (for validation
    of where they stand in ``cmd``), no values needed."""
    def one(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return "{item" + match.group(1) + "}"
        return "{params." + ITEM_PARAM + match.group(2).replace(".", "__") + "}"
    out: dict[str, Any] = _rewrite(kwargs, one)
    return out


def _rewrite(value: Any, one: Callable[[re.Match[str]], str]) -> Any:
    if isinstance(value, str):
        return ITEM_RE.sub(one, value) if "{" in value else value
    if isinstance(value, Mapping):
        return {k: _rewrite(v, one) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rewrite(v, one) for v in value]
    return value


def item_message(message: str) -> str:
    """A parameter message about a rewritten ``{item}`` spelled the way it was written."""
    return re.sub(r"\{params\." + ITEM_PARAM + r"((?:__\w+?)*)\}",
                  lambda m: "{item" + m.group(1).replace("__", ".") + "}", message)


def task_map_problems(task: TaskDef, defn: WorkflowDef) -> Iterator[tuple[str, str]]:
    """``(message, field)`` for each problem of a mapped task: its ``map`` spec, what it
    maps over, and where its ``{item}`` placeholders stand in ``cmd``."""
    problems = list(spec_problems(task.map))
    yield from problems
    if task.workflow is not None or task.merge is True:
        yield ("map works on tasks that run a command or a function, not on sub-workflows "
               "or merge nodes; map a task inside the child workflow"), "map"
    if problems or not isinstance(task.map, Mapping):
        return
    source, ref, _ = parse_over(task.map["over"])
    deps = task.depends_on if isinstance(task.depends_on, list | tuple) else ()
    if source == "inputs" and ref not in deps:
        yield (f"map.over reads inputs.{ref}, but {ref!r} is not in depends_on; add it (a "
               "map reads the output of a direct dependency)"), "map.over"
    known = set(defn.params) | set(defn.parameters or {}) \
        if isinstance(defn.params, Mapping) else set()
    if source == "params" and ref not in known:
        yield (f"map.over reads params.{ref}, but the workflow has no parameter {ref!r}; "
               "declare it under parameters (type: array)"), "map.over"
    if isinstance(task.kwargs, Mapping):
        for message in cmd_problems(template_refs(task.kwargs).get("cmd")):
            yield item_message(message), "kwargs.cmd"

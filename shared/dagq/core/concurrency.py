"""Concurrency keys: ``concurrency: {key: "{params.dataset}", limit: 2}`` on a task or a
workflow (the default of every task that sets none).

At most ``limit`` attempts whose key renders to the same text run at once across every
workflow of a store; the coordinator enforces it with one record per key in the store
(``dagq.runtime.slots``). This module is the pure part: the spec, its validation and the
rendering of a key for one attempt.

A key expression is text with placeholders ``{params.NAME}``, ``{item}`` and
``{item.FIELD}`` (the last two only in mapped tasks). An expression that is a single
placeholder renders as ``NAME=value`` (``{params.dataset}`` -> ``dataset=x``,
``{item.gpu}`` -> ``gpu=a100``, ``{item}`` -> ``item=...``), so two parameters with the
same value never share a key by accident; any other expression renders as written with
each placeholder replaced (``"user-{params.user}"`` -> ``user-ana``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dagq.core.mapping import item_text
from dagq.core.priority import priority_problem
from dagq.core.rules import describe

MAX_LIMIT = 32
"""Largest ``limit``: the holders of one key live in one store record (a Table entity)."""
MAX_KEY_CHARS = 200
"""Longest key expression, and longest rendered key."""
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_REF = re.compile(r"params\.([A-Za-z_][A-Za-z0-9_]*)|item((?:\.[A-Za-z_][A-Za-z0-9_]*)*)")
_FIELDS = frozenset({"key", "limit"})


@dataclass(frozen=True)
class Spec:
    """A validated ``concurrency`` field."""

    key: str
    """The key expression."""
    limit: int
    """Attempts with the same rendered key that may run at once."""


def spec_of(task_value: Any, workflow_value: Any) -> Spec | None:
    """The spec that applies to a task (its own, else the workflow's), or None."""
    value = task_value if task_value is not None else workflow_value
    if not isinstance(value, Mapping) or value.get("key") is None:
        return None
    return Spec(str(value["key"]), int(value.get("limit", 1)))


def spec_problems(value: object, mapped: bool = False) -> Iterator[tuple[str, str]]:
    """``(message, field)`` for everything wrong with a ``concurrency`` value (a task's
    when ``mapped`` says whether ``{item}`` may be used)."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        yield (f"concurrency must be a mapping {{key, limit}}, got {describe(value)}",
               "concurrency")
        return
    for name in value:
        if name not in _FIELDS:
            yield (f"unknown field {name!r} in concurrency; allowed: key, limit",
                   f"concurrency.{name}")
    key = value.get("key")
    if not isinstance(key, str) or not key.strip():
        yield (f"concurrency.key must be a non-empty string such as "
               f"'{{params.dataset}}', got {describe(key)}", "concurrency.key")
    elif len(key) > MAX_KEY_CHARS:
        yield (f"concurrency.key is {len(key)} characters long; the limit is "
               f"{MAX_KEY_CHARS}", "concurrency.key")
    else:
        for inner in _PLACEHOLDER.findall(key):
            m = _REF.fullmatch(inner)
            if m is None:
                yield (f"concurrency.key: {{{inner}}} is not a placeholder; use "
                       f"{{params.NAME}}, {{item}} or {{item.FIELD}}", "concurrency.key")
            elif m.group(1) is None and not mapped:
                yield (f"concurrency.key: {{{inner}}} names the item of a mapped task, "
                       f"and this task has no map", "concurrency.key")
    limit = value.get("limit", 1)
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        yield (f"concurrency.limit must be an integer from 1 to {MAX_LIMIT}, got "
               f"{describe(limit)}", "concurrency.limit")


def sharing_problems(concurrency: object, priority: object,
                     mapped: bool = False) -> Iterator[tuple[str, str]]:
    """``(message, field)`` for a task's or workflow's ``concurrency`` and ``priority``."""
    yield from spec_problems(concurrency, mapped)
    if (problem := priority_problem(priority)) is not None:
        yield problem, "priority"


def render_key(expr: str, params: Mapping[str, Any], item: tuple[bool, Any]) -> str:
    """The key of one attempt; ``ValueError`` naming what is missing (a parameter not
    given, an item field the item lacks)."""
    refs = _PLACEHOLDER.findall(expr)

    def value(inner: str) -> tuple[str, str]:
        m = _REF.fullmatch(inner)
        if m is None:
            raise ValueError(f"{{{inner}}} is not a placeholder")
        if m.group(1) is not None:
            name = m.group(1)
            if name not in params:
                raise ValueError(f"no parameter {name!r} was given")
            v = params[name]
            return name, v if isinstance(v, str) else item_text(v)
        mapped, current = item
        if not mapped:
            raise ValueError("{item} is used outside a mapped task")
        path = [p for p in m.group(2).split(".") if p]
        for p in path:
            if not isinstance(current, Mapping) or p not in current:
                raise ValueError(f"the item has no field {p!r}")
            current = current[p]
        return (path[-1] if path else "item"), item_text(current)

    if len(refs) == 1 and expr.strip() == f"{{{refs[0]}}}":
        name, text = value(refs[0])
        key = f"{name}={text}"
    else:
        key = _PLACEHOLDER.sub(lambda m: value(m.group(1))[1], expr)
    if len(key) > MAX_KEY_CHARS:
        key = key[:MAX_KEY_CHARS - 1] + "…"
    return key

"""Definition values that would pass a type check but break something later, caught early.

Validation calls these so that such a definition is refused with a problem naming the
field and the rule, instead of being stored and failing (or crashing) at run time:

- text that is not valid UTF-8 (lone surrogates) anywhere, integers of more than 4300
  digits anywhere, control characters in mapping keys;
- (durations too long to mean anything are bounded in ``dagq.core.task_checks``);
- what a process can never be started with: NUL bytes in ``cmd``, ``cwd`` or ``env``,
  and environment variable names that are empty or contain ``=``.

``printable`` makes a problem safe to print or send as JSON whatever text it quotes.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from dagq.core import values
from dagq.core.rules import join_path
from dagq.errors import Problem

MAX_ITEMS = 10_000_000
"""Most values walked in one task (the sink of a million-task fan-in alone names a
million dependencies)."""
MAX_LEVELS = values.MAX_DEPTH + 8
"""Deepest level walked (a definition's own levels above its kwargs, plus their limit)."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


Where = str | tuple[Any, str | int]
"""A path, built only when a problem is reported: a string, or ``(parent, key)``."""
_FIELDS: dict[type, tuple[str, ...]] = {}


def value_problems(root: object, prefix: str = "") -> Iterator[tuple[str, str]]:
    """``(path, message)`` for text, numbers and keys under ``root`` that dagq cannot
    carry. Walks mappings, lists and (frozen) dataclasses without recursion; leaves are
    checked where they are found and paths spelled out only for what is reported, so a
    clean walk costs little more than one look at each value."""
    stack: list[tuple[object, Where, int]] = [(root, prefix, 0)]
    seen = 0
    while stack:
        item, where, level = stack.pop()
        if level > MAX_LEVELS:
            continue  # too deep (or cyclic): the nesting rule of kwargs/params reports it
        kind = type(item)
        children: Iterable[tuple[str | int, object]]
        if kind is dict or (kind is not str and isinstance(item, Mapping)):
            pairs: list[tuple[str | int, object]] = []
            for key, sub in item.items():  # type: ignore[attr-defined]
                if isinstance(key, str):
                    if not key.isascii() and (why := values.string_problem(key)) is not None:
                        yield _path(where), f"a key {why}"
                        continue
                    if (bad := _CONTROL.search(key)) is not None:
                        yield _path(where), (f"the key {key!r} contains the control "
                                             f"character U+{ord(bad.group()):04X}; keys "
                                             "must be printable")
                        continue
                pairs.append((str(key), sub))
            children = pairs
        elif kind is tuple or kind is list or isinstance(item, list | tuple):
            children = enumerate(item)  # type: ignore[arg-type]
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            names = _FIELDS.get(kind)
            if names is None:
                names = _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(item))
            children = [(name, getattr(item, name)) for name in names]
        else:
            seen += 1
            yield from _leaf(item, where)
            continue
        for key, sub in children:
            seen += 1
            if seen > MAX_ITEMS:
                yield _path(where), "the definition is too large"
                return
            t = type(sub)
            if t is str:
                text: str = sub  # type: ignore[assignment]
                if not text.isascii() and (why := values.string_problem(text)) is not None:
                    yield _path((where, key)), f"the text {why}"
            elif t is int:
                number: int = sub  # type: ignore[assignment]
                if (why := values.int_problem(number)) is not None:
                    yield _path((where, key)), f"the number {why}"
            elif sub is None or t is bool or t is float:
                continue
            else:
                stack.append((sub, (where, key), level + 1))


def _leaf(item: object, where: Where) -> Iterator[tuple[str, str]]:
    """Problems of a value that holds no other values (subclasses of str and int too)."""
    if isinstance(item, str):
        if (why := values.string_problem(item)) is not None:
            yield _path(where), f"the text {why}"
    elif (isinstance(item, int) and not isinstance(item, bool)
          and (why := values.int_problem(item)) is not None):
        yield _path(where), f"the number {why}"


def _path(where: Where) -> str:
    keys: list[str | int] = []
    while isinstance(where, tuple):
        where, key = where
        keys.append(key)
    path = where
    for key in reversed(keys):
        path = f"{path}[{key}]" if isinstance(key, int) else join_path(path, key)
    return path


def definition_problems(defn: Any, task_path: Callable[[int], str],
                        prefix: str = "", skip: Sequence[int] = b"") -> list[Problem]:
    """``value_problems`` of a whole definition: its own fields, then each task's (paths
    of tasks from ``task_path(index)``); tasks flagged in ``skip`` are known clean."""
    found: list[Problem] = []
    for f in dataclasses.fields(defn):
        if f.name != "tasks":
            found += [Problem(m, field=w)
                      for w, m in value_problems(getattr(defn, f.name), prefix + f.name)]
    tasks = defn.tasks if isinstance(defn.tasks, list | tuple) else ()
    for i, task in enumerate(tasks):
        if i < len(skip) and skip[i]:
            continue
        name = getattr(task, "name", None)
        owner = name if isinstance(name, str) and values.string_problem(name) is None else None
        found += [Problem(m, task=owner, field=w)
                  for w, m in value_problems(task, task_path(i))]
    return found


def process_problems(kwargs: Mapping[str, object]) -> Iterator[tuple[str, str]]:
    """``(field, message)`` for ``cmd``/``cwd``/``env`` values no process can be given."""
    cmd = kwargs.get("cmd")
    parts = cmd if isinstance(cmd, list) else [cmd]
    if any(isinstance(p, str) and "\x00" in p for p in parts):
        yield "kwargs.cmd", "kwargs.cmd contains a NUL byte, which no command line can hold"
    cwd = kwargs.get("cwd")
    if isinstance(cwd, str) and "\x00" in cwd:
        yield "kwargs.cwd", "kwargs.cwd contains a NUL byte, which no path can hold"
    env = kwargs.get("env")
    if not isinstance(env, Mapping):
        return
    for name, value in env.items():
        if not isinstance(name, str):
            continue
        if not name or "=" in name or "\x00" in name:
            yield "kwargs.env", (f"environment variable name {name!r} is not allowed: names "
                                 "must be non-empty and contain neither '=' nor NUL")
        if isinstance(value, str) and "\x00" in value:
            yield "kwargs.env", (f"kwargs.env.{name} contains a NUL byte, which no "
                                 "environment variable can hold")


def printable(problem: Problem) -> Problem:
    """``problem`` with any text that is not valid UTF-8 escaped (``\\udXXX``)."""
    parts = (problem.message, problem.task, problem.field)
    if all(p is None or values.string_problem(p) is None for p in parts):
        return problem
    return dataclasses.replace(problem, message=_escape(problem.message),
                               task=_escape(problem.task), field=_escape(problem.field))


def _escape(text: str | None) -> Any:
    if text is None:
        return None
    return text.encode("utf-8", "backslashreplace").decode("utf-8")

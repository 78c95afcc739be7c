"""Canonical JSON values: the one form every output, kwarg and parameter must have to travel.

A value is canonical when every mapping key is a string, every string is valid UTF-8
(no lone surrogates such as ``"\\ud800"``, which no UTF-8 encoder accepts), every float
is finite (JSON has no NaN or infinity), every integer has at most ``MAX_INT_DIGITS``
digits (Python refuses to parse or print longer ones by default) and lists and mappings
nest at most ``MAX_DEPTH`` levels (deeper values overflow recursive encoders). Such a
value can be encoded, stored, decoded and encoded again by every part of dagq.

The walks here are iterative, so a value nested thousands of levels deep is reported,
never a ``RecursionError``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

MAX_DEPTH = 64
"""Deepest nesting of lists and mappings in a canonical value."""
MAX_INT_DIGITS = 4300
"""Most digits of an integer (Python's default ``sys.get_int_max_str_digits()``)."""
_MAX_INT = 10 ** MAX_INT_DIGITS


class ValueRejected(ValueError):
    """Raised when data is not a canonical JSON value; the message names the rule."""


def string_problem(text: str) -> str | None:
    """Why ``text`` cannot be carried as UTF-8, or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"contains the lone surrogate U+{ord(text[exc.start]):04X} at character "
                f"{exc.start}, which is not valid UTF-8")
    return None


def utf8_text(text: str, limit: int) -> str:
    """``text`` made valid UTF-8 (lone surrogates replaced) and at most ``limit``
    characters long (the tail is kept: error texts say the most at their end)."""
    if string_problem(text) is not None:
        text = text.encode("utf-8", "replace").decode("utf-8")
    if len(text) > limit:
        text = "..." + text[-(limit - 3):]
    return text


def int_problem(number: int) -> str | None:
    """Why ``number`` is too large to carry, or None."""
    if -_MAX_INT < number < _MAX_INT:
        return None
    return f"is an integer of more than {MAX_INT_DIGITS} digits; pass it as a string"


def value_problems(value: object, path: str = "") -> Iterator[tuple[str, str]]:
    """``(path, rule broken)`` for each part of ``value`` that is not canonical."""
    stack: list[tuple[object, str, int]] = [(value, path, 0)]
    while stack:
        item, where, level = stack.pop()
        kind = type(item)
        if item is None or kind is bool:
            continue
        if kind is str:
            if (why := string_problem(item)) is not None:  # type: ignore[arg-type]
                yield where, f"the string {why}"
        elif isinstance(item, int) and not isinstance(item, bool):
            if (why := int_problem(item)) is not None:
                yield where, f"the number {why}"
        elif isinstance(item, float):
            if not math.isfinite(item):
                yield where, f"{item} is not allowed: JSON has no NaN or infinity"
        elif level >= MAX_DEPTH and isinstance(item, Mapping | list | tuple):
            yield where, f"nested more than {MAX_DEPTH} levels deep"
        elif isinstance(item, Mapping):
            for key, sub in item.items():
                if not isinstance(key, str):
                    yield where, f"keys must be strings, got {type(key).__name__}"
                    continue
                if (why := string_problem(key)) is not None:
                    yield where, f"a key {why}"
                    continue
                stack.append((sub, f"{where}.{key}" if where else key, level + 1))
        elif isinstance(item, list | tuple):
            stack.extend((sub, f"{where}[{i}]", level + 1) for i, sub in enumerate(item))
        else:
            yield where, f"a {kind.__name__} is not a JSON value"


def check(value: object, what: str) -> None:
    """Raise ``ValueRejected`` naming ``what`` and the first rule ``value`` breaks."""
    for where, why in value_problems(value):
        at = f" at {where}" if where else ""
        raise ValueRejected(f"{what}{at}: {why}")


def _no_constant(name: str) -> Any:
    raise ValueRejected(f"{name} is not allowed: JSON has no NaN or infinity")


def loads(data: bytes | str, what: str = "value") -> Any:
    """Parse canonical JSON strictly; raises ``ValueRejected`` naming ``what`` and the rule.

    Rejects what ``json.loads`` lets through (``NaN``, ``Infinity``, lone surrogate
    escapes) and turns what it crashes on (deep nesting, huge integers, bad UTF-8) into
    the same error.
    """
    try:
        text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
        value = json.loads(text, parse_constant=_no_constant)
    except ValueRejected as exc:
        raise ValueRejected(f"{what}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueRejected(f"{what} is not valid UTF-8: {exc}") from None
    except RecursionError:
        raise ValueRejected(f"{what} is nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:  # JSONDecodeError, or an integer over the digit limit
        if "digits" in str(exc):
            raise ValueRejected(f"{what} holds an integer of more than {MAX_INT_DIGITS} "
                                "digits; pass it as a string") from None
        raise ValueRejected(f"{what} is not valid JSON: {exc}") from None
    check(value, what)
    return value


def dumps(value: object, what: str = "value") -> bytes:
    """``value`` as compact UTF-8 JSON; raises ``ValueRejected`` if it is not canonical."""
    check(value, what)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

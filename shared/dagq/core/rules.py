"""Rules for single values of a definition: task and queue names, plain JSON data.

Shared by validation and by anything else that accepts such values (e.g. a queue name
on the command line). Each check returns a message saying what is wrong, or None.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping

from dagq.core.model import MERGE_PREFIX

IMPORT_PATH_RE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
"""Shape of an import path (``kwargs.call``, factories, processors):
``package.module:name``, the name possibly dotted."""

MAX_NAME_LENGTH = 200
MAX_NESTING = 64
"""Deepest nesting of lists and mappings accepted in ``kwargs`` and ``params``."""
QUEUE_RULE = (
    "use 1-36 characters of lowercase letters, digits and single hyphens, starting and "
    "ending with a letter or digit (queue names become Azure queue names, which allow "
    "nothing else)"
)
_QUEUE_RE = re.compile(r"[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){0,35}")
_FORBIDDEN_IN_NAMES = "\\#?"
_BAD_IN_NAMES = re.compile(r"[\\#?\x00-\x1f\x7f-\x9f]")


def describe(value: object) -> str:
    """A short description of a value's type for messages, e.g. ``a string ('x')``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int) and not -10 ** 30 < value < 10 ** 30:
        return f"an integer of {len(str(abs(value)))} digits"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({shown!r})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"


COMPLETIONS_QUEUE = "completions"
"""Logical name of the completion queue (completions and control messages)."""
DEADLETTER_QUEUE = "deadletter"
"""Logical name of the dead-letter queue of the Storage-queue backend."""
NOTIFICATIONS_QUEUE = "notifications"
"""Logical name of the queue of hook deliveries waiting to be made (dagq.runtime.webhooks)."""
EVENTS_QUEUE = "events"
"""Logical name of the outbound queue of workflow events (Event Grid, Logic Apps)."""
RESERVED_QUEUES = frozenset({COMPLETIONS_QUEUE, DEADLETTER_QUEUE, NOTIFICATIONS_QUEUE,
                             EVENTS_QUEUE})
"""Queue names dagq uses itself (the completion queue, the dead-letter store, and the
notification and event queues of workflow hooks)."""


def queue_problem(queue: object) -> str | None:
    """Why ``queue`` is not a valid queue name, or None."""
    if not isinstance(queue, str):
        return f"queue name must be a string, got {describe(queue)}"
    if queue in RESERVED_QUEUES:
        return (f"queue name {queue!r} is reserved for dagq's own messages; name the "
                f"hardware class something else (e.g. 'cpu')")
    if _QUEUE_RE.fullmatch(queue):
        return None
    folded = re.sub(r"[^a-z0-9]+", "-", queue.lower()).strip("-")[:36].strip("-")
    hint = f"; did you mean {folded!r}?" if folded and _QUEUE_RE.fullmatch(folded) else ""
    return f"queue name {queue!r} is not allowed: {QUEUE_RULE}{hint}"


DOT_SEGMENTS = frozenset({".", ".."})
"""URL path segments that clients and servers remove (RFC 3986, section 5.2.4)."""


def task_name_problem(name: object, merge: bool = False) -> str | None:
    """Why ``name`` is not a valid task name, or None."""
    if not isinstance(name, str):
        return f"task name must be a string, got {describe(name)}; quote it"
    if not name:
        return "task name is empty"
    if name.startswith(MERGE_PREFIX) != merge:
        if merge:
            return f"merge nodes must be named {MERGE_PREFIX}..., got {name!r}"
        return (f"task names starting with {MERGE_PREFIX!r} are reserved for the merge nodes "
                "made by sequentialize_fan_in; rename the task")
    if len(name) > MAX_NAME_LENGTH and not merge:
        return f"task name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}"
    bad = _BAD_IN_NAMES.search(name)
    if bad and bad.group() in _FORBIDDEN_IN_NAMES:
        return (f"task name {name!r} contains {bad.group()!r}; '\\', '#' and '?' are not "
                "allowed because task names are used in storage keys and URLs")
    if bad:
        return f"task name {name!r} contains the control character U+{ord(bad.group()):04X}"
    if name != name.strip():
        return f"task name {name!r} starts or ends with whitespace"
    if DOT_SEGMENTS.intersection(name.split("/")):
        return (f"task name {name!r} is, or has a part between '/' that is, '.' or '..': "
                "URLs drop such parts, so the task's routes would name another resource; "
                "rename it")
    return None


def json_problems(value: object, path: str) -> Iterator[tuple[str, str]]:
    """``(path, message)`` for every part of ``value`` that is not plain JSON data."""
    stack: list[tuple[object, str, int]] = [(value, path, 0)]
    while stack:
        item, where, level = stack.pop()
        if item is None or isinstance(item, str | bool | int):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                yield where, f"{item} is not allowed: JSON has no NaN or infinity"
            continue
        if level >= MAX_NESTING:
            yield where, f"nested more than {MAX_NESTING} levels deep"
            continue
        if isinstance(item, Mapping):
            for key, sub in item.items():
                if not isinstance(key, str):
                    yield where, f"keys must be strings, got {describe(key)}; quote the key"
                    continue
                stack.append((sub, join_path(where, key), level + 1))
        elif isinstance(item, list | tuple):
            stack.extend((sub, f"{where}[{i}]", level + 1) for i, sub in enumerate(item))
        else:
            hint = "; quote it to keep it as a string" if type(item).__name__ in (
                "date", "datetime") else ""
            yield where, f"{describe(item)} is not a JSON value{hint}"


def join_path(prefix: str, key: str) -> str:
    """``prefix.key``, or ``prefix["key"]`` when ``key`` is not a plain word."""
    if re.fullmatch(r"[A-Za-z_$][\w$-]*", key):
        return f"{prefix}.{key}" if prefix else key
    return f"{prefix}[{_quote(key)}]"


def _quote(key: str) -> str:
    # a JSON string literal: control characters escaped too, so the path parses back
    return json.dumps(key, ensure_ascii=False)


def plain_json(value: object, level: int) -> bool:
    """Fast check that ``value`` is plain JSON data (no paths; see json_problems)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    if level >= MAX_NESTING:
        return False
    if kind is dict:
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str or not plain_json(item, level + 1):
                return False
        return True
    if kind is list or kind is tuple:
        return all(plain_json(item, level + 1) for item in value)  # type: ignore[attr-defined]
    return False

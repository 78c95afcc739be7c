"""Checks that a definition's names fit what the storage services accept.

Validation calls :func:`storage_name_problems` so that a name the Azure services would
reject is reported at submit time, with the field it came from, instead of failing a
write later (see :mod:`dagq.core.limits` for the numbers and their sources).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from dagq.core.limits import WORKFLOW_ID_MAX_CHARS, WORKFLOW_NAME_MAX_CHARS
from dagq.core.model import TaskDef, WorkflowDef
from dagq.core.paths import segment_problem

Where = str | tuple[int, str]
"""A field path, or ``(task index, field)``."""
_ID_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._~-]*[A-Za-z0-9])?")


def workflow_id_problem(workflow_id: object) -> str | None:
    """Why ``workflow_id`` cannot name a workflow, or None. Ids end in a letter or digit
    because the Blob service drops a trailing dot from a path segment."""
    if not isinstance(workflow_id, str):
        return f"a workflow id must be a string, got {type(workflow_id).__name__}"
    shown = repr(workflow_id) if len(workflow_id) <= 60 else f"{workflow_id[:40]!r}..."
    if len(workflow_id) > WORKFLOW_ID_MAX_CHARS:
        return (f"workflow id {shown} is {len(workflow_id)} characters long; the limit is "
                f"{WORKFLOW_ID_MAX_CHARS}")
    if not _ID_RE.fullmatch(workflow_id):
        return (f"workflow id {shown} is invalid: use 1-{WORKFLOW_ID_MAX_CHARS} letters, "
                "digits, '.', '_', '~' or '-', starting and ending with a letter or digit")
    return None


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Control characters (ESC, BEL, NUL, ...) and bidirectional overrides: printed by
``dagq list`` or a log line they would drive the terminal or disguise the text."""


def workflow_name_problem(name: object) -> str | None:
    """Why ``name`` cannot be a workflow name (too long, or holding characters that a
    terminal acts on), or None (emptiness and type are checked by validation)."""
    if not isinstance(name, str):
        return None
    if len(name) > WORKFLOW_NAME_MAX_CHARS:
        return (f"the workflow name is {len(name)} characters long ({name[:40]!r}...); "
                f"the limit is {WORKFLOW_NAME_MAX_CHARS}")
    bad = _UNPRINTABLE.search(name)
    if bad is not None:
        return (f"the workflow name {name[:60]!r} contains the control character "
                f"U+{ord(bad.group()):04X}; use printable characters only")
    return None


def storage_name_problems(defn: WorkflowDef, prefix: str = "",
                          skip: Sequence[int] = b"") -> Iterator[tuple[str, Where, str | None]]:
    """``(message, where, task name)`` for every name of ``defn`` that cannot be stored
    (tasks flagged in ``skip`` are known to have a plain name)."""
    if (problem := workflow_name_problem(defn.name)) is not None:
        yield problem, prefix + "name", None
    tasks = defn.tasks if isinstance(defn.tasks, list | tuple) else ()
    for i, t in enumerate(tasks):
        if (i < len(skip) and skip[i]) or not isinstance(t, TaskDef) \
                or not isinstance(t.name, str) or t.merge is True:
            continue
        problem = segment_problem(t.name, f"task name {t.name[:40]!r}")
        if problem is not None:
            yield (f"{problem}; use fewer characters outside A-Z, a-z, 0-9 and '-_.~'",
                   (i, "name"), None)

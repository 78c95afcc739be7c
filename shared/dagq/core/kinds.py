"""Task kinds: what a task runs, and the ``kwargs`` keys each kind accepts.

Every task has exactly one kind. A kind is chosen by its *marker* key in ``kwargs``
(``cmd`` for a shell command, ``call`` for a Python function), by ``workflow`` (a child
workflow), by ``merge`` (the fan-in transform's nodes) or explicitly by ``kind: noop``
(a join that runs nothing). A task with none of these runs nothing by accident, so it
is an error. Keys a kind does not declare are errors too (with "did you mean"), except
keys starting with ``x_``, which are passed through untouched for tools of your own.

Custom processors declare their kind with :func:`register_kind`; the JSON Schema
(``dagq.core.schema``) is generated from the same declarations, so the editor and the
validator cannot disagree. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

EXTENSION_PREFIX = "x_"
"""``kwargs`` keys starting with this are never checked (room for your own tools)."""

_ENV = {"description": "Extra environment variables of the task: names to strings or numbers.",
        "type": "object",
        "additionalProperties": {"type": ["string", "number", "boolean"]}}
_CWD = {"description": "Working directory on the worker.", "type": "string", "minLength": 1}
_DIRSYNC = {
    "description": "Sync this directory to output storage in the background while the task "
                   "runs (a path, or {path, every_s, dest}); fetch it with fetch_dir().",
    "anyOf": [
        {"type": "string", "minLength": 1},
        {"type": "object", "additionalProperties": False, "required": ["path"],
         "properties": {
             "path": {"type": "string", "minLength": 1,
                      "description": "Directory to sync (relative to cwd)."},
             "every_s": {"type": "number", "exclusiveMinimum": 0,
                         "description": "Seconds between sync rounds."},
             "dest": {"type": "string", "minLength": 1,
                      "description": "Relative name to sync under (default: the task's name)."},
         }},
    ],
}
MAX_GPUS = 64
"""Most GPUs one task may ask for (``kwargs.gpus``)."""
_GPUS = {
    "description": "GPUs this task needs; the worker gives it that many free devices as "
                   "CUDA_VISIBLE_DEVICES (0: none). Unset: the worker's --gpus-per-task.",
    "type": "integer", "minimum": 0, "maximum": MAX_GPUS,
}


@dataclass(frozen=True)
class TaskKind:
    """One kind of task and the ``kwargs`` keys it accepts."""

    name: str
    """What users write in ``kind:`` and what messages call it."""
    description: str
    """One line for docs, schema and messages."""
    marker: str | None = None
    """The ``kwargs`` key that selects this kind (None: chosen another way)."""
    keys: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Accepted ``kwargs`` keys and a JSON Schema fragment for each."""


SHELL = TaskKind(
    "shell", "a shell command line run through /bin/sh -c", marker="cmd",
    keys={"cmd": {"description": "Shell command line (through /bin/sh -c). {params.NAME} is "
                                 "replaced by the parameter's value, quoted for where it "
                                 "stands (refused inside backquotes, ${...}, arithmetic "
                                 "and comments).",
                  "type": "string", "minLength": 1, "pattern": "\\S"},
          "env": _ENV, "cwd": _CWD, "bg_dirsync_to": _DIRSYNC, "gpus": _GPUS})
FUNCTION = TaskKind(
    "function", "a Python function called as package.module:function", marker="call",
    keys={"call": {"description": "The function to call, as 'package.module:function'.",
                   "type": "string", "pattern": "^[A-Za-z_][\\w.]*:[A-Za-z_][\\w.]*$"},
          "args": {"description": "Keyword arguments of the function (JSON values). String "
                                  "values of exactly '{params.NAME}' become the parameter.",
                   "type": "object"},
          "env": _ENV, "cwd": _CWD, "bg_dirsync_to": _DIRSYNC, "gpus": _GPUS})
WORKFLOW = TaskKind("workflow", "a child workflow (the task's 'workflow' field)")
NOOP = TaskKind("noop", "runs nothing: a join point for its dependencies")
MERGE = TaskKind("merge", "a merge node written by the fan-in transform")
BUILTIN: tuple[TaskKind, ...] = (SHELL, FUNCTION, WORKFLOW, NOOP, MERGE)
WRITABLE = ("shell", "function", "workflow", "noop")
"""Values users may write in ``kind:``."""

_custom: dict[str, TaskKind] = {}


def register_kind(kind: TaskKind) -> None:
    """Declare a custom processor's kind: its accepted keys and, optionally, a marker
    key that selects it (without one, tasks select it with ``kind: NAME``).

    Registering the same declaration again is a no-op; a different one under a taken
    name or marker raises ``ValueError``.
    """
    for other in (*BUILTIN, *_custom.values()):
        if other == kind:
            return
        if other.name == kind.name or (other.marker and other.marker == kind.marker):
            raise ValueError(f"task kind {kind.name!r} (marker {kind.marker!r}) clashes with "
                             f"the kind {other.name!r} (marker {other.marker!r})")
    _custom[kind.name] = kind


def unregister_kind(name: str) -> None:
    """Forget the custom kind ``name`` (no-op if it is not registered)."""
    _custom.pop(name, None)


@contextmanager
def registered_kind(kind: TaskKind) -> Iterator[TaskKind]:
    """``kind`` registered for the duration of a ``with`` block (tests, tools)."""
    register_kind(kind)
    try:
        yield kind
    finally:
        unregister_kind(kind.name)


def custom_kinds() -> tuple[TaskKind, ...]:
    """The registered custom kinds, in registration order."""
    return tuple(_custom.values())


def marked_kinds() -> tuple[TaskKind, ...]:
    """Every kind chosen by a ``kwargs`` marker key (shell, function, then custom)."""
    return (SHELL, FUNCTION, *(k for k in _custom.values() if k.marker))


def kind_by_name(name: str) -> TaskKind | None:
    """The kind called ``name`` (built-in or custom), or None."""
    for kind in (*BUILTIN, *_custom.values()):
        if kind.name == name:
            return kind
    return None


def all_keys() -> list[str]:
    """Every declared ``kwargs`` key of every kind (for suggestions)."""
    seen: dict[str, None] = {}
    for kind in marked_kinds():
        seen.update(dict.fromkeys(kind.keys))
    return list(seen)

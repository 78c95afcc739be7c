"""Authoring checks of one task: its kind and ``kwargs`` keys, duration bounds, and
names that conditions can refer to.

Each function yields ``(message, field)`` pairs, ``field`` relative to the task
(``""`` for the task itself); ``dagq.core.validate`` adds the task's path. Pure.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator, Mapping

from dagq.core.hardening import process_problems
from dagq.core.kinds import (
    EXTENSION_PREFIX,
    MAX_GPUS,
    NOOP,
    WORKFLOW,
    WRITABLE,
    TaskKind,
    custom_kinds,
    kind_by_name,
    marked_kinds,
)
from dagq.core.model import TaskDef, WorkflowDef
from dagq.core.rules import IMPORT_PATH_RE, describe

MAX_DELAY_S = 7 * 24 * 3600
"""Longest ``delay_s`` and retry backoff: an Azure Storage queue message can be hidden
for at most 7 days (visibilitytimeout, https://learn.microsoft.com/rest/api/storageservices/put-message)."""
MAX_TIMEOUT_S = 31 * 24 * 3600
"""Longest ``timeout_s`` of one attempt (31 days); unset means no limit."""
GLOB_IN_NAMES = "*[]"
"""Characters refused in task names: conditions select inputs by glob (``inputs["t-*"]``),
so a name holding them could not be referred to (``?`` is refused by the name rules)."""

Found = Iterator[tuple[str, str]]


def task_problems(task: TaskDef, *, kind: bool = True) -> Found:
    """Every authoring problem of ``task`` beyond the field-by-field checks (``kind``
    False leaves out the kind checks, when the parser already reported the cause)."""
    if isinstance(task.name, str):
        yield from _glob_name(task.name)
    yield from _durations(task)
    if kind and task.merge is False and isinstance(task.kwargs, Mapping):
        yield from _kind(task)


def workflow_problems(defn: WorkflowDef) -> Found:
    """Authoring problems of the workflow's own fields (paths are field names)."""
    t = defn.default_task_timeout_s
    if _number(t) and t > MAX_TIMEOUT_S:  # type: ignore[operator]
        yield _too_long("default_task_timeout_s", t, MAX_TIMEOUT_S,
                        "leave it unset for no limit"), "default_task_timeout_s"


def kwargs_problems(kwargs: Mapping[str, object]) -> Found:
    """``(message, field)`` for the ``kwargs`` values of shell and function tasks."""
    cmd, env, cwd = kwargs.get("cmd"), kwargs.get("env"), kwargs.get("cwd")
    if "cmd" in kwargs and (not isinstance(cmd, str) or not cmd.strip()):
        yield f"kwargs.cmd must be a non-empty command line, got {describe(cmd)}", "kwargs.cmd"
    if env is not None and (not isinstance(env, Mapping) or not all(
            isinstance(v, str | int | float) for v in env.values())):
        yield "kwargs.env must map variable names to strings or numbers", "kwargs.env"
    if cwd is not None and not isinstance(cwd, str):
        yield f"kwargs.cwd must be a directory path, got {describe(cwd)}", "kwargs.cwd"
    call = kwargs.get("call")
    if "call" in kwargs and (not isinstance(call, str) or not IMPORT_PATH_RE.fullmatch(call)):
        yield (f"kwargs.call must name a function as 'package.module:function', got "
               f"{describe(call)}"), "kwargs.call"
    if "call" in kwargs and "cmd" in kwargs:
        yield ("give kwargs.cmd (a shell command) or kwargs.call (a Python function), "
               "not both"), "kwargs"
    if "bg_dirsync_to" in kwargs:
        for message in dirsync_problems(kwargs["bg_dirsync_to"]):
            yield message, "kwargs.bg_dirsync_to"
    for key, message in process_problems(kwargs):
        yield message, key
    gpus = kwargs.get("gpus")
    if "gpus" in kwargs and (isinstance(gpus, bool) or not isinstance(gpus, int)
                             or not 0 <= gpus <= MAX_GPUS):
        yield (f"kwargs.gpus must be a whole number of GPUs from 0 to {MAX_GPUS}, got "
               f"{describe(gpus)}"), "kwargs.gpus"
    args = kwargs.get("args")
    if "call" in kwargs and args is not None and not isinstance(args, Mapping):
        yield (f"kwargs.args must be a mapping of keyword arguments, got "
               f"{describe(args)}"), "kwargs.args"


def dirsync_problems(value: object) -> Iterator[str]:
    """Messages about ``kwargs.bg_dirsync_to``: a path, or ``{path, every_s, dest}``."""
    spec = {"path": value} if isinstance(value, str) else value
    if not isinstance(spec, Mapping):
        yield ("kwargs.bg_dirsync_to must be a directory path or a mapping "
               f"{{path, every_s, dest}}, got {describe(value)}")
        return
    unknown = sorted(set(spec) - {"path", "every_s", "dest"})
    if unknown:
        yield (f"kwargs.bg_dirsync_to has unknown key(s) {', '.join(unknown)}; "
               "use path, every_s and dest")
    path, every, dest = spec.get("path"), spec.get("every_s"), spec.get("dest")
    if not isinstance(path, str) or not path.strip():
        yield "kwargs.bg_dirsync_to needs a non-empty directory path"
    if every is not None and (isinstance(every, bool) or not isinstance(every, int | float)
                              or every <= 0):
        yield f"kwargs.bg_dirsync_to.every_s must be seconds above 0, got {describe(every)}"
    if dest is not None and (not isinstance(dest, str) or not dest.strip()
                             or dest.startswith("/") or ".." in dest.split("/")):
        yield (f"kwargs.bg_dirsync_to.dest must be a relative name like 'ckpt', got "
               f"{describe(dest)}")


def _glob_name(name: str) -> Found:
    bad = sorted({c for c in name if c in GLOB_IN_NAMES})
    if bad:
        yield (f"task name {name!r} contains {', '.join(map(repr, bad))}: conditions select "
               "inputs with glob patterns (inputs[\"train-*\"]), so no condition could refer "
               "to this task; use letters, digits, '-', '_' or '.'"), "name"


def _number(value: object) -> bool:
    if isinstance(value, bool):
        return False  # an int too large for a float is still finite: never math.isfinite it
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _too_long(what: str, value: object, limit: int, fix: str) -> str:
    days = limit // 86400
    return (f"{what} is {describe(value)} seconds, more than the limit of {limit} "
            f"({days} days); durations are in seconds, {fix}")


def _durations(task: TaskDef) -> Found:
    for key in ("delay_s", "retry_backoff_s", "retry_backoff_max_s"):
        value = getattr(task, key)
        if _number(value) and value > MAX_DELAY_S:
            yield _too_long(key, value, MAX_DELAY_S,
                            "and a queued task cannot wait longer (use a schedule)"), key
    t = task.timeout_s
    if _number(t) and t > MAX_TIMEOUT_S:  # type: ignore[operator]
        yield _too_long("timeout_s", t, MAX_TIMEOUT_S, "leave it unset for no limit"), \
            "timeout_s"


def _kind(task: TaskDef) -> Found:
    kwargs = task.kwargs
    explicit = task.kind
    if explicit is not None and (not isinstance(explicit, str) or kind_by_name(explicit) is None
                                 or explicit == "merge"):
        names = [*WRITABLE, *(k.name for k in custom_kinds())]
        close = difflib.get_close_matches(str(explicit), names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        yield f"unknown kind {describe(explicit)}; use one of {', '.join(names)}{hint}", "kind"
        return
    marked = [k for k in marked_kinds() if k.marker in kwargs]
    if len(marked) > 1:
        if {k.name for k in marked} != {"shell", "function"}:  # that pair is reported already
            yield ("kwargs selects several kinds at once ("
                   + ", ".join(f"{k.marker} for {k.name}" for k in marked)
                   + "); give one"), "kwargs"
        return
    inferred = WORKFLOW if task.workflow is not None else (marked[0] if marked else None)
    if explicit is not None and inferred is not None and explicit != inferred.name:
        yield (f"kind is {explicit!r} but the task is {inferred.description} "
               f"({_selector(inferred)}); make them agree or remove kind"), "kind"
        return
    kind = inferred or (kind_by_name(explicit) if explicit is not None else None)
    if kind is None:
        yield _nothing_to_run(kwargs), "kwargs" if kwargs else ""
        return
    if kind.marker is not None and kind.marker not in kwargs:
        yield f"a {kind.name} task needs kwargs.{kind.marker}", "kwargs"
    if kind is WORKFLOW and task.workflow is None:
        yield "kind 'workflow' needs the 'workflow' field (a file path or an inline " \
              "definition)", "kind"
    elif kind is WORKFLOW:
        extra = [k for k in kwargs if k not in ("cmd", "call")]  # those two are reported
        yield from _unused(extra, "a task with 'workflow' runs the child workflow")
    elif kind is NOOP:
        yield from _unused(list(kwargs), "a noop task runs nothing")
    else:
        yield from _unknown_keys(kind, kwargs)


def _selector(kind: TaskKind) -> str:
    return "it has 'workflow'" if kind is WORKFLOW else f"it has kwargs.{kind.marker}"


def _unused(keys: list[str], why: str) -> Found:
    for key in keys:
        if isinstance(key, str) and not key.startswith(EXTENSION_PREFIX):
            yield f"{why}, so kwargs.{key} would never be used; remove it", f"kwargs.{key}"


def _unknown_keys(kind: TaskKind, kwargs: Mapping[str, object]) -> Found:
    for key in kwargs:
        if not isinstance(key, str) or key in kind.keys or key.startswith(EXTENSION_PREFIX):
            continue  # non-string keys are reported by the JSON checks
        close = difflib.get_close_matches(key, list(kind.keys), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        yield (f"unknown key kwargs.{key} for a {kind.name} task; {hint}{kind.name} tasks "
               f"take {', '.join(kind.keys)} (keys starting with {EXTENSION_PREFIX!r} are "
               "passed through unchecked)"), f"kwargs.{key}"


def _nothing_to_run(kwargs: Mapping[str, object]) -> str:
    markers = [k.marker for k in marked_kinds() if k.marker]
    hints = []
    for key in kwargs:
        close = difflib.get_close_matches(str(key), markers, n=1)
        if close and close[0] in markers:
            hints.append(f"kwargs.{key}: did you mean {close[0]!r}?")
    lead = "; ".join(hints) + "; " if hints else ""
    return (f"{lead}this task runs nothing: give kwargs.cmd (a shell command), kwargs.call "
            "(a Python function) or workflow (a child workflow), or write 'kind: noop' for "
            "a join that only waits for its dependencies")

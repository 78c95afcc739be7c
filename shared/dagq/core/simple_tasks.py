"""Tasks that are valid on their own, recognised by one cheap look.

Validating a task field by field (``dagq.core.validate``, ``hardening``, ``name_rules``,
``params``) costs tens of microseconds, most of it spent finding nothing: a workflow of
100,000 ``{name, kwargs: {cmd}, depends_on}`` tasks took seconds to check. Most tasks
are plain — a short ASCII name, a shell command or a function call with flat arguments,
numbers in range — and for those a handful of type and range tests proves what the full
checks would conclude. :func:`simple_tasks` marks such tasks; validation runs its full,
message-writing checks only on the others, so a definition with problems still gets every
message it got before. Checks between tasks (duplicate names, unknown dependencies,
cycles, ``dep_policy`` counts) always run on every task.

The promise — a task marked simple yields no problem in any per-task check — is what
``tests/core/test_simple_tasks.py`` tests, on generated tasks near every boundary.
Anything unusual (sub-workflows, conditions, merge nodes, ``{params.NAME}`` references,
nested arguments, ``x-`` keys, custom kinds' markers, non-ASCII text) is simply not
simple: the full checks decide. Pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import TypeGuard

from dagq.core.kinds import FUNCTION, MAX_GPUS, SHELL, custom_kinds
from dagq.core.model import MERGE_PREFIX, TaskDef
from dagq.core.rules import IMPORT_PATH_RE, MAX_NAME_LENGTH, queue_problem
from dagq.core.task_checks import MAX_DELAY_S, MAX_TIMEOUT_S

_NAME = re.compile(r"[A-Za-z0-9_~-](?:[A-Za-z0-9_.~-]{0,"
                   + str(MAX_NAME_LENGTH - 2) + r"}[A-Za-z0-9_~-])?")
"""Plain task names: no dot at either end (a trailing dot is encoded in object names), so
the encoded name is the name itself and far below the segment limit."""
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""Plain environment variable names and argument names."""
_SMALL_INT = 10 ** 15
_REFERENCE = "{params."
_SHELL_KEYS = frozenset({"cmd", "cwd", "env", "gpus"})
_FUNCTION_KEYS = frozenset({"call", "args", "cwd", "env", "gpus"})
_TUNING = attrgetter("queue", "dep_policy", "num_retries", "retry_backoff_s",
                     "retry_backoff_max_s", "timeout_s", "delay_s")
_DEFAULTS = _TUNING(TaskDef(""))
_DEFAULT_TYPES = tuple(map(type, _DEFAULTS))
"""Types too: ``0 == 0.0 == False``, so equal values alone could hide a boolean."""
assert set(SHELL.keys) >= _SHELL_KEYS and set(FUNCTION.keys) >= _FUNCTION_KEYS


def simple_tasks(tasks: Sequence[object]) -> bytearray:
    """A flag per task: 1 where the task is plain enough to be valid on its own."""
    markers = {k.marker for k in custom_kinds() if k.marker}
    shell, function = _SHELL_KEYS - markers, _FUNCTION_KEYS - markers
    queues: dict[object, bool] = {}
    flags = bytearray(len(tasks))
    for i, task in enumerate(tasks):
        if type(task) is TaskDef and _fields_plain(task, queues):
            kwargs = task.kwargs
            if task.kind is None:
                if "cmd" in kwargs:
                    flags[i] = _shell(kwargs, shell)
                elif "call" in kwargs:
                    flags[i] = _function(kwargs, function)
            elif task.kind == "noop" and type(task.kind) is str:
                flags[i] = not kwargs
    return flags


def _fields_plain(t: TaskDef, queues: dict[object, bool]) -> bool:
    """Everything but ``kwargs`` and ``kind``: at its default or plainly in range."""
    if (t.workflow is not None or t.condition is not None or t.merge is not False
            or t.map is not None or t.cache is not None
            or t.concurrency is not None or t.priority is not None
            or type(t.kwargs) is not dict or type(t.name) is not str
            or _NAME.fullmatch(t.name) is None or t.name.startswith(MERGE_PREFIX)):
        return False
    deps = t.depends_on
    if type(deps) is not tuple:
        return False
    if deps:
        try:
            if not "".join(deps).isascii():  # TypeError: a dependency that is no string
                return False
        except TypeError:
            return False
    row = _TUNING(t)
    if row == _DEFAULTS and tuple(map(type, row)) == _DEFAULT_TYPES:
        return True  # the common case: every tuning field at its default, in two comparisons
    policy = t.dep_policy
    if type(policy) is str:
        if policy != "all" and policy != "any":
            return False
    elif type(policy) is not int or not 1 <= policy <= len(deps):
        return False
    if t.queue is not None:
        good = queues.get(t.queue)
        if good is None:
            good = queues[t.queue] = type(t.queue) is str and queue_problem(t.queue) is None
        if not good:
            return False
    retries = t.num_retries
    return (type(retries) is int and 0 <= retries < _SMALL_INT
            and _seconds(t.retry_backoff_s, MAX_DELAY_S, False)
            and _seconds(t.retry_backoff_max_s, MAX_DELAY_S, False)
            and _seconds(t.delay_s, MAX_DELAY_S, False)
            and (t.timeout_s is None or _seconds(t.timeout_s, MAX_TIMEOUT_S, True)))


def _seconds(value: object, limit: int, positive: bool) -> bool:
    kind = type(value)
    if kind is int:
        number: float = value  # type: ignore[assignment]
    elif kind is float and math.isfinite(value):  # type: ignore[arg-type]
        number = value  # type: ignore[assignment]
    else:
        return False
    return (number > 0 if positive else number >= 0) and number <= limit


def _text(value: object) -> TypeGuard[str]:
    """An ASCII string without NUL and without ``{params.`` references."""
    return (type(value) is str and value.isascii()
            and "\x00" not in value and _REFERENCE not in value)


def _common(kwargs: Mapping[str, object], keys: frozenset[str]) -> bool:
    """The keys shell and function tasks share: ``cwd``, ``env``, ``gpus``."""
    if not keys.issuperset(kwargs):
        return False
    if "cwd" in kwargs and not _text(kwargs["cwd"]):
        return False
    if "gpus" in kwargs:
        gpus = kwargs["gpus"]
        if type(gpus) is not int or not 0 <= gpus <= MAX_GPUS:
            return False
    env = kwargs.get("env")
    if env is None:
        return True
    return type(env) is dict and all(
        type(k) is str and _WORD.fullmatch(k) is not None and _text(v)
        for k, v in env.items())


def _shell(kwargs: Mapping[str, object], keys: frozenset[str]) -> bool:
    cmd = kwargs["cmd"]
    return _text(cmd) and bool(cmd.strip()) and _common(kwargs, keys)


def _function(kwargs: Mapping[str, object], keys: frozenset[str]) -> bool:
    call = kwargs["call"]
    if not _text(call) or IMPORT_PATH_RE.fullmatch(call) is None:
        return False
    args = kwargs.get("args")
    if args is not None and (type(args) is not dict or not all(
            type(k) is str and _WORD.fullmatch(k) is not None and _scalar(v)
            for k, v in args.items())):
        return False
    return _common(kwargs, keys)


def _scalar(value: object) -> bool:
    kind = type(value)
    if kind is str:
        return _text(value)
    if kind is int:
        return -_SMALL_INT < value < _SMALL_INT  # type: ignore[operator]
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    return value is None or kind is bool

"""How the workflow builder turns a Python function into a task a worker can run.

A worker runs a function task by importing it in a fresh process, so the builder
records its import path (``module:qualname``) and checks, while building, that the
path leads back to the very same function and that its arguments travel as JSON.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from dagq.core.rules import IMPORT_PATH_RE
from dagq.errors import DefinitionError, Problem
from dagq.imports import resolve

CALL_RE = IMPORT_PATH_RE
"""Shape of ``kwargs.call``: ``package.module:function`` (the qualname may be dotted)."""
INPUTS_PARAMETER = "inputs"
"""A function parameter with this name receives the direct upstream outputs."""
ITEM_PARAMETER = "item"
"""An instance of a mapped task passes its item to a function parameter of this name."""

_IMPORTABLE_HINT = ("the worker imports function tasks by module path in a fresh process, "
                    "so define the function at the top level of an importable module")


def _fail(message: str, task: str | None = None) -> DefinitionError:
    return DefinitionError([Problem(message, task=task)])


def import_path(fn: Callable[..., Any], task: str | None = None) -> str:
    """``module:qualname`` of ``fn``; ``DefinitionError`` if a worker could not import it."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    label = f"{module}.{qualname}" if module and qualname else repr(fn)
    if not isinstance(module, str) or not isinstance(qualname, str):
        raise _fail(f"{fn!r} has no import path (it is not a plain function or class); "
                    f"{_IMPORTABLE_HINT}, or give call='package.module:function'", task)
    if qualname == "<lambda>" or getattr(fn, "__name__", "") == "<lambda>":
        raise _fail(f"a lambda ({label}) cannot be a task: {_IMPORTABLE_HINT}", task)
    if "<locals>" in qualname:
        raise _fail(f"{label} is defined inside another function: {_IMPORTABLE_HINT}", task)
    if module == "__main__":
        raise _fail(f"{qualname} is defined in the script being run (__main__), which the "
                    f"worker cannot import: {_IMPORTABLE_HINT} (e.g. tasks.py) and import "
                    "it from your script", task)
    owner = getattr(fn, "__self__", None)
    if inspect.ismethod(fn) and not inspect.isclass(owner):
        raise _fail(f"{label} is a method bound to an object, which cannot travel to a "
                    f"worker: {_IMPORTABLE_HINT}", task)
    path = f"{module}:{qualname}"
    try:
        found = resolve_call(path)
    except ImportError as exc:
        raise _fail(f"cannot import {path!r}: {exc}; {_IMPORTABLE_HINT}", task) from None
    if found is not fn and found != fn:
        raise _fail(f"{path!r} names a different object than the function given (was it "
                    "re-bound, or wrapped by a decorator without functools.wraps?); pass the "
                    "object the module exposes under that name", task)
    return path


def resolve_call(path: str) -> Callable[..., Any]:
    """Import ``module:qualname`` and return the callable; ``ImportError`` says why not."""
    obj = resolve(path)
    if not callable(obj):
        raise ImportError(f"{path!r} is a {type(obj).__name__}, not a callable")
    return obj  # type: ignore[no-any-return]


def wants_inputs(fn: Callable[..., Any]) -> bool:
    """True if ``fn`` declares a keyword-passable parameter named ``inputs``."""
    params = _parameters(fn)
    p = params.get(INPUTS_PARAMETER) if params else None
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


def bind_problem(fn: Callable[..., Any], args: Mapping[str, Any]) -> str | None:
    """Why ``fn(**args)`` cannot be called (missing/unknown arguments), or None."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None  # builtins without a signature: let the call itself decide
    call_args = dict(args)
    if wants_inputs(fn):
        call_args.setdefault(INPUTS_PARAMETER, {})
    if ITEM_PARAMETER in sig.parameters:  # an instance of a mapped task gets its item there
        call_args.setdefault(ITEM_PARAMETER, None)
    try:
        sig.bind(**call_args)
    except TypeError as exc:
        return str(exc)
    return None


def json_args(args: Mapping[str, Any], where: str, task: str | None = None) -> dict[str, Any]:
    """``args`` as plain JSON data (tuples become lists); ``DefinitionError`` naming the
    argument that cannot travel as JSON."""
    for key, value in args.items():
        if not isinstance(key, str):
            raise _fail(f"{where}: argument names must be strings, got {key!r}", task)
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise _fail(f"{where}: argument {key!r} is not JSON-serialisable ({exc}); task "
                        "arguments travel in the task message, so pass plain data (numbers, "
                        "strings, lists, dicts) and load anything bigger inside the task",
                        task) from None
    plain: dict[str, Any] = json.loads(json.dumps(dict(args)))
    return plain


def is_finite_number(value: object) -> bool:
    """True for finite ints and floats (not booleans)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _parameters(fn: Callable[..., Any]) -> Mapping[str, inspect.Parameter] | None:
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None

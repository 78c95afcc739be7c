"""Child workflows made by Python factories, and turning a ``SubWorkflow`` into a definition.

    @workflow_factory
    def etl(region: str) -> Workflow:
        return Workflow("etl", Chain(task(extract, region=region), task(load)))

    daily = Workflow("daily", Group(task("eu", workflow=etl.as_step(region="eu")), ...))

The factory runs in the coordinator when the parent task becomes ready (so it must be
importable there); if it raises or returns an invalid definition, the parent task fails
at once with the reason.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Generic, ParamSpec

from dagq.core.model import SubWorkflow, WorkflowDef
from dagq.core.validate import validate
from dagq.errors import DagqError, DefinitionError
from dagq.imports import resolve

P = ParamSpec("P")


class WorkflowFactory(Generic[P]):
    """A function returning a workflow, usable as a sub-workflow step."""

    def __init__(self, fn: Callable[P, Any]) -> None:
        self.fn = fn
        self.path = import_path(fn)
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        return self.fn(*args, **kwargs)

    def as_step(self, **params: Any) -> SubWorkflow:
        """A ``SubWorkflow`` that calls this factory with ``params`` when it is due."""
        return SubWorkflow(factory=self.path, params=params)


def workflow_factory(fn: Callable[P, Any]) -> WorkflowFactory[P]:
    """Decorate a function returning a ``Workflow`` (or ``WorkflowDef``) as a factory."""
    return WorkflowFactory(fn)


def import_path(fn: Callable[..., Any]) -> str:
    """``module:qualname`` of a module-level function; ``DagqError`` if not importable."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname or "." in qualname:
        raise DagqError(
            f"{qualname or fn!r} must be a module-level function of an importable module "
            "(not a lambda, a nested function or a function of the __main__ script): "
            "the coordinator and workers import it by name")
    return f"{module}:{qualname}"


def load_callable(path: str) -> Callable[..., Any]:
    """Import ``module:qualname``; ``DagqError`` saying what failed."""
    try:
        obj = resolve(path)
    except Exception as exc:
        raise DagqError(f"cannot import {path!r}: {type(exc).__name__}: {exc}") from None
    if isinstance(obj, WorkflowFactory):
        return obj.fn
    if not callable(obj):
        raise DagqError(f"{path!r} is not callable")
    return obj  # type: ignore[no-any-return]


def resolve_child(sub: SubWorkflow) -> WorkflowDef:
    """The child definition of ``sub`` with its params applied; raises ``DagqError``."""
    if sub.definition is not None:
        child = sub.definition
    elif sub.factory is not None:
        fn = load_callable(sub.factory)
        try:
            made = fn(**dict(sub.params))
        except Exception as exc:
            raise DagqError(f"factory {sub.factory!r} raised {type(exc).__name__}: {exc}"
                            ) from None
        build = getattr(made, "build", None)
        child = build() if callable(build) else made
        if not isinstance(child, WorkflowDef):
            raise DagqError(f"factory {sub.factory!r} returned {type(made).__name__}, "
                            "not a Workflow or WorkflowDef")
        problems = validate(child)
        if problems:
            raise DefinitionError(problems, source=f"factory {sub.factory}")
    else:
        raise DagqError("the child workflow was given by a path that was never loaded; "
                        "submit with `dagq submit`/`dagq run` so child files are inlined")
    params = {**dict(child.params), **dict(sub.params)}
    return replace(child, params=params) if params != dict(child.params) else child

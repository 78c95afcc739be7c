"""Reading definition files for ``validate``, ``submit``, ``run`` and ``graph``.

Two rules on top of ``dagq.compose.loader.load_file``:

- a file that does not exist is said to be missing (``MissingFile``, exit 5), not a
  problem in a definition;
- a task's relative ``kwargs.cwd`` is relative to the directory of the file that defines
  it (a child workflow file's tasks: to that file's), so an example or a project's
  pipeline runs the same from any directory. It becomes an absolute path when the CLI
  submits to a store; through ``--api`` it is left as written (the workers are not on
  this machine). A ``cwd`` with a ``{params.K}`` reference is resolved after the
  parameters are put in; absolute paths and tasks without ``cwd`` are left alone.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from dagq.compose.loader import load_file
from dagq.core.model import SubWorkflow, TaskDef, WorkflowDef
from dagq.errors import MissingFile


def check_exists(path: str) -> None:
    """``MissingFile`` when nothing is at ``path``."""
    if not os.path.exists(path):
        raise MissingFile(f"{path}: no such file")


def read_definition(path: str) -> WorkflowDef:
    """The definition in ``path``; ``MissingFile`` if there is no such file,
    ``DefinitionError`` if it is not a valid definition."""
    check_exists(path)
    return load_file(path)


def anchor_cwd(defn: WorkflowDef, path: str) -> WorkflowDef:
    """``defn`` (read from ``path``) with every relative ``kwargs.cwd`` made absolute
    against the directory of the file that defines the task."""
    return _anchor(defn, Path(os.path.abspath(path)).parent)


def _anchor(defn: WorkflowDef, base: Path) -> WorkflowDef:
    tasks = tuple(_anchor_task(t, base) for t in defn.tasks)
    if all(a is b for a, b in zip(tasks, defn.tasks, strict=True)):
        return defn
    return dataclasses.replace(defn, tasks=tasks)


def _anchor_task(task: TaskDef, base: Path) -> TaskDef:
    out = task
    cwd = task.kwargs.get("cwd")
    if isinstance(cwd, str) and cwd and not os.path.isabs(cwd) and "{" not in cwd:
        out = dataclasses.replace(out, kwargs={**task.kwargs,
                                               "cwd": os.path.normpath(base / cwd)})
    sub = task.workflow
    if sub is not None and sub.definition is not None:
        child_base = base / os.path.dirname(sub.path) if sub.path else base
        child = _anchor(sub.definition, child_base)
        if child is not sub.definition:
            out = dataclasses.replace(out, workflow=SubWorkflow(
                child, sub.path, sub.factory, sub.params))
    return out

"""Reads definition files from disk (the core parser never touches files).

Child workflows named by path (``workflow: etl.yaml``) are read relative to the file that
names them and inlined, so a submitted workflow carries everything it needs: the
coordinator may run far from the submitter's disk.
"""

from __future__ import annotations

import stat
from dataclasses import replace
from pathlib import Path
from typing import Literal

from dagq.core.model import SubWorkflow, TaskDef, WorkflowDef
from dagq.core.parse import load_definition
from dagq.errors import DefinitionError, Problem
from dagq.gc_pause import paused

MAX_DEPTH = 8
MAX_FILE_BYTES = 128 * 1024 * 1024
"""Largest definition file read (a child workflow file must also be a regular file): a
million-task workflow written as JSON is 50-80 MB."""


def load_file(path: str | Path) -> WorkflowDef:
    """Parse and validate ``path`` and every child file it names; ``DefinitionError`` lists
    every problem."""
    with paused():
        return _load(Path(path), ())


def _load(p: Path, stack: tuple[Path, ...]) -> WorkflowDef:
    try:
        if stack and not stat.S_ISREG(p.stat().st_mode):  # a device or FIFO never ends
            raise DefinitionError([Problem("a child workflow file must be a regular file")],
                                  source=str(p))
        with p.open("rb") as f:  # the top file may be a pipe (stdin, <(...)): bounded read
            text = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        problem = Problem(f"cannot read file: {exc.strerror}")
        raise DefinitionError([problem], source=str(p)) from None
    if len(text) > MAX_FILE_BYTES:
        raise DefinitionError([Problem(f"the file is over {MAX_FILE_BYTES} bytes, the most "
                                       "a definition file may have")], source=str(p))
    fmt: Literal["json"] | None = "json" if p.suffix.lower() == ".json" else None
    try:
        defn = load_definition(text, source=str(p), fmt=fmt)
    except DefinitionError as exc:
        exc.source = exc.source or str(p)
        raise
    return _inline_children(defn, p, (*stack, p.resolve()))


def _inline_children(defn: WorkflowDef, p: Path, stack: tuple[Path, ...]) -> WorkflowDef:
    tasks: list[TaskDef] = []
    problems: list[Problem] = []
    changed = False
    for t in defn.tasks:
        sub = t.workflow
        if sub is None or (sub.path is None and sub.definition is None):
            tasks.append(t)
            continue
        if sub.definition is not None:  # inline: its own children may name files
            child = _inline_children(sub.definition, p, stack)
        else:
            assert sub.path is not None
            child_path = (p.parent / sub.path)
            if child_path.resolve() in stack or len(stack) >= MAX_DEPTH:
                chain = " -> ".join(str(s.name) for s in (*stack, child_path))
                problems.append(Problem(f"child workflows include each other: {chain}",
                                        task=t.name, field="workflow"))
                tasks.append(t)
                continue
            try:
                child = _load(child_path, stack)
            except DefinitionError as exc:
                problems += [Problem(f"in child workflow {sub.path}: {q}", task=t.name,
                                     field="workflow") for q in exc.problems]
                tasks.append(t)
                continue
        tasks.append(replace(t, workflow=SubWorkflow(definition=child, path=sub.path,
                                                     params=sub.params)))
        changed = True
    if problems:
        raise DefinitionError(problems, source=str(p))
    return replace(defn, tasks=tuple(tasks)) if changed else defn


def require_inline(defn: WorkflowDef, *, why: str = "") -> WorkflowDef:
    """Return ``defn`` if every child workflow is inline; else ``DefinitionError`` naming
    each task whose child is only a file path (nothing can read that file here)."""
    problems = [
        Problem(f"child workflow {t.workflow.path!r} is a file path, which cannot be read "
                f"{why or 'here'}: put the child definition inline under 'workflow:' "
                "(or submit with the dagq CLI, which inlines child files)",
                task=t.name, field="workflow")
        for t in _all_tasks(defn)
        if t.workflow is not None and t.workflow.definition is None
        and t.workflow.path is not None
    ]
    if problems:
        raise DefinitionError(problems)
    return defn


def _all_tasks(defn: WorkflowDef) -> list[TaskDef]:
    out: list[TaskDef] = []
    for t in defn.tasks:
        out.append(t)
        if t.workflow is not None and t.workflow.definition is not None:
            out += _all_tasks(t.workflow.definition)
    return out

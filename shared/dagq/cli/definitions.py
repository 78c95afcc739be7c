"""Reading definition files for ``validate``, ``submit``, ``run`` and ``graph``.

Two rules on top of ``dagq.compose.loader.load_file``:

- a file that does not exist is said to be missing (``MissingFile``, exit 5), not a
  problem in a definition;
- a task's relative ``kwargs.cwd`` is relative to the directory of the file that defines
  it (a child workflow file's tasks: to that file's), so an example or a project's
  pipeline runs the same from any directory. It becomes an absolute path when the CLI
  submits to a store; through ``--api`` it is left as written (the workers are not on
  this machine). A ``cwd`` with a ``{params.K}`` reference is resolved after the
  parameters are put in; absolute paths and tasks without ``cwd`` are left alone;
- ``cache: {files: [paths]}`` (of a task or of the workflow) names files whose content
  is part of the cache key: when the CLI submits, runs or plans a definition it reads
  them — relative to the directory of the file that defines them — and puts
  ``{path: sha256}`` in their place (``with_file_digests``), through ``--api`` too (the
  files are on this machine). A directory counts as all the files below it. A file that
  is not there is ``MissingFile`` naming the task and the path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click

from dagq.cli.params import with_params
from dagq.compose.loader import load_file
from dagq.core.caching import without_cache
from dagq.core.model import SubWorkflow, TaskDef, WorkflowDef
from dagq.errors import MissingFile

F = TypeVar("F", bound=Callable[..., Any])


def check_exists(path: str) -> None:
    """``MissingFile`` when nothing is at ``path``."""
    if not os.path.exists(path):
        raise MissingFile(f"{path}: no such file")


def read_definition(path: str) -> WorkflowDef:
    """The definition in ``path``; ``MissingFile`` if there is no such file,
    ``DefinitionError`` if it is not a valid definition."""
    check_exists(path)
    return load_file(path)


def no_cache_option(f: F) -> F:
    """Add ``--no-cache`` (collected as ``no_cache``) to a command."""
    return click.option(
        "--no-cache", "no_cache", is_flag=True,
        help="Run every task: take nothing from the cache and store nothing in it "
             "(as if no task had a 'cache' field).")(f)


def prepared(path: str, params: tuple[str, ...], *, local: bool = True,
             no_cache: bool = False) -> WorkflowDef:
    """The definition in ``path`` as ``submit``, ``run`` and ``plan`` send it: ``--param``
    values applied, ``cache.files`` digested, the cache off with ``no_cache``, and (for
    a ``local`` store) relative ``cwd`` anchored."""
    defn = with_file_digests(with_params(read_definition(path), params), path)
    if no_cache:
        defn = without_cache(defn)
    return anchor_cwd(defn, path) if local else defn


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


def with_file_digests(defn: WorkflowDef, path: str) -> WorkflowDef:
    """``defn`` (read from ``path``) with every ``cache.files`` list replaced by the
    SHA-256 of each file it names; ``MissingFile`` names the task and the path of one
    that does not exist."""
    return _digests(defn, Path(os.path.abspath(path)).parent)


def _digests(defn: WorkflowDef, base: Path) -> WorkflowDef:
    cache = _cache_files(defn.cache, base, f"workflow {defn.name!r}")
    tasks = tuple(_digests_task(t, base) for t in defn.tasks)
    if cache is defn.cache and all(a is b for a, b in zip(tasks, defn.tasks, strict=True)):
        return defn
    return dataclasses.replace(defn, cache=cache, tasks=tasks)


def _digests_task(task: TaskDef, base: Path) -> TaskDef:
    out = task
    cache = _cache_files(task.cache, base, f"task {task.name!r}")
    if cache is not task.cache:
        out = dataclasses.replace(out, cache=cache)
    sub = task.workflow
    if sub is not None and sub.definition is not None:
        child = _digests(sub.definition,
                         base / os.path.dirname(sub.path) if sub.path else base)
        if child is not sub.definition:
            out = dataclasses.replace(out, workflow=dataclasses.replace(sub, definition=child))
    return out


def _cache_files(value: bool | Mapping[str, Any] | None, base: Path,
                 owner: str) -> bool | Mapping[str, Any] | None:
    """``value`` with its ``files`` list as ``{path: sha256}`` (unchanged without one)."""
    if not isinstance(value, Mapping) or not isinstance(value.get("files"), list):
        return value
    digests = {}
    for name in value["files"]:
        where = base / name
        if not where.exists():
            raise MissingFile(f"{owner}: cache.files names {name!r}, which does not exist "
                              f"({where})")
        digests[name] = file_digest(where)
    return {**value, "files": digests}


def file_digest(path: Path) -> str:
    """SHA-256 (hex) of a file's content; of a directory, of every file below it (their
    paths and contents, in path order)."""
    if not path.is_dir():
        with path.open("rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    h = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f"{item.relative_to(path).as_posix()}\0{file_digest(item)}\n".encode())
    return h.hexdigest()

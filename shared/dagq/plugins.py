"""Custom task kinds from import paths: ``DAGQ_TASK_KINDS`` and ``--kinds``.

Every process that validates definitions (the CLI, the coordinator, the Functions app)
must know the kinds your custom processors declare, or tasks of those kinds are
refused. ``DAGQ_TASK_KINDS=pkg.mod:SPARK,pkg.other:MyProcessor`` names them; each
entry is a ``TaskKind``, a list of them, or a ``Processor`` class whose ``task_kind``
attribute is one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from dagq.core.kinds import TaskKind, register_kind
from dagq.errors import ConfigError
from dagq.imports import IMPORT_PATH_RE, resolve

ENV = "DAGQ_TASK_KINDS"


def import_attr(spec: str, what: str, example: str) -> Any:
    """The object ``module:attr`` names (resolved by ``dagq.imports``); ``ConfigError``
    naming ``what`` (the flag or variable) if it cannot be had."""
    spec = spec.strip()
    if not IMPORT_PATH_RE.fullmatch(spec):
        raise ConfigError(f"{what} {spec!r} must look like 'package.module:NAME', e.g. "
                          f"{example!r}")
    try:
        return resolve(spec)
    except ImportError as exc:
        raise ConfigError(f"{what} {spec!r} cannot be imported: {exc}") from None


def register_or_fail(kind: TaskKind, what: str) -> None:
    """``register_kind`` with a clash reported as a ``ConfigError`` naming ``what``."""
    try:
        register_kind(kind)
    except ValueError as exc:
        raise ConfigError(f"{what}: {exc}") from None


def load_kinds(specs: Iterable[str], *, what: str = ENV) -> list[TaskKind]:
    """Import and register the kinds named by ``specs`` (``module:attr`` each)."""
    loaded: list[TaskKind] = []
    for spec in specs:
        value = import_attr(spec, what, "mypkg.kinds:SPARK")
        value = getattr(value, "task_kind", value)
        kinds = list(value) if isinstance(value, list | tuple) else [value]
        for kind in kinds:
            if not isinstance(kind, TaskKind):
                raise ConfigError(f"{what} {spec!r} is not a TaskKind, a list of them or a "
                                  "Processor class with a task_kind")
            register_or_fail(kind, f"{what} {spec!r}")
            loaded.append(kind)
    return loaded


def processor_kinds(specs: Iterable[str]) -> None:
    """Register the ``task_kind`` of each ``--processor`` class, before the definitions
    that use it are validated (processors without one are fine)."""
    for spec in specs:
        kind = getattr(import_attr(spec, "--processor", "mypkg.procs:SparkProcessor"),
                       "task_kind", None)
        if isinstance(kind, TaskKind):
            register_or_fail(kind, f"--processor {spec!r}")


def load_kinds_from_env(env: Mapping[str, str] | None = None) -> list[TaskKind]:
    """Register the kinds named by ``DAGQ_TASK_KINDS`` (comma-separated; unset: none)."""
    raw = (os.environ if env is None else env).get(ENV, "")
    return load_kinds([s for s in raw.split(",") if s.strip()])

"""The processors a worker uses: custom ones named by ``--processor``, then the built-ins."""

from __future__ import annotations

from dagq.errors import ConfigError
from dagq.imports import IMPORT_PATH_RE, resolve
from dagq.worker.function_processor import FunctionProcessor
from dagq.worker.processors import NoopProcessor, Processor, ShellProcessor


def load_processor(spec: str) -> Processor:
    """Instantiate ``module:Class`` (a ``Processor`` subclass); ``ConfigError`` if it fails."""
    if not IMPORT_PATH_RE.fullmatch(spec):
        raise ConfigError(f"--processor {spec!r} must look like 'package.module:ClassName'")
    try:
        cls = resolve(spec)
    except ImportError as exc:
        raise ConfigError(f"--processor {spec!r} cannot be imported: {exc}") from None
    proc = cls() if isinstance(cls, type) else None
    if not isinstance(proc, Processor):
        raise ConfigError(f"--processor {spec!r} is not a dagq.worker.Processor subclass")
    if proc.task_kind is not None:  # its declared keys, so definitions using it validate
        from dagq.plugins import register_or_fail

        register_or_fail(proc.task_kind, f"--processor {spec!r}")
    return proc


def default_processors() -> list[Processor]:
    """The built-in processors in matching order."""
    return [ShellProcessor(), FunctionProcessor(), NoopProcessor()]

"""The one resolver of ``module:qualname`` import paths (function tasks, processors,
workflow factories).

Every kind of import path follows the same rules: the shape ``IMPORT_PATH_RE`` checks
(a dotted module, a colon, a possibly dotted qualified name), the current directory on
``sys.path`` (so a project's own modules import as they do in ``python -m``), and an
``ImportError`` that says which part failed. Callers turn that into their own error.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from dagq.core.rules import IMPORT_PATH_RE

__all__ = ["IMPORT_PATH_RE", "resolve"]


def resolve(path: str) -> Any:
    """The object ``path`` (``package.module:qualname``) names; ``ImportError`` says why
    it cannot be had (bad shape, module import failure, missing attribute). Any other
    exception the module raises while importing propagates unchanged."""
    if not isinstance(path, str) or not IMPORT_PATH_RE.fullmatch(path):
        raise ImportError(f"{path!r} does not look like 'package.module:name'")
    module_name, _, qualname = path.partition(":")
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f"{type(exc).__name__}: {exc}") from exc
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            where = getattr(obj, "__name__", module_name)
            raise ImportError(f"{where!r} has no attribute {part!r}") from None
    return obj

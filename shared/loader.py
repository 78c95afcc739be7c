"""Reads definition files from disk (the core parser never touches files)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from shared.core.model import WorkflowDef
from shared.core.parse import load_definition
from shared.errors import DefinitionError, Problem


def load_file(path: str | Path) -> WorkflowDef:
    """Parse and validate the definition in ``path``; ``DefinitionError`` lists every problem."""
    p = Path(path)
    try:
        text = p.read_bytes()
    except OSError as exc:
        problem = Problem(f"cannot read file: {exc.strerror}")
        raise DefinitionError([problem], source=str(p)) from None
    fmt: Literal["json"] | None = "json" if p.suffix.lower() == ".json" else None
    try:
        return load_definition(text, source=str(p), fmt=fmt)
    except DefinitionError as exc:
        exc.source = exc.source or str(p)
        raise

"""The JSON Schema (draft 2020-12) of workflow definitions, shipped inside the package.

The shipped file is generated (``dagq.core.schema.generate``) and carries an ``$id``.
Editors use it through ``# yaml-language-server: $schema=PATH`` (YAML) or a top-level
``"$schema": "PATH"`` (JSON); see docs/definitions.md.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

SCHEMA_FILE = "workflow-definition.schema.json"


def schema_path() -> Path:
    """Path of the schema file inside the installed package."""
    return Path(str(files(__name__).joinpath(SCHEMA_FILE)))


@cache
def _schema_text() -> str:
    return files(__name__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


def load_schema() -> dict[str, Any]:
    """The schema as a fresh dict (safe to modify)."""
    schema: dict[str, Any] = json.loads(_schema_text())
    return schema

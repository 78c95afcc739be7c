"""dagq: a workflow (DAG) engine for Azure with an embedded SQLite default.

The public surface is what ``__all__`` lists (a test pins it); everything else is
internal and may change. Names load on first use, so ``import dagq`` stays cheap for
task processes::

    from dagq import Workflow, Chain, Group, task, WorkflowClient, open_backend
    from dagq.task import set_output, get_upstream_output   # inside a running task
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # authoring
    "Chain": "dagq.compose.builder",
    "Group": "dagq.compose.builder",
    "WithDelay": "dagq.compose.builder",
    "Workflow": "dagq.compose.builder",
    "task": "dagq.compose.builder",
    "workflow_factory": "dagq.compose.factory",
    "load_file": "dagq.compose.loader",
    "WorkflowDef": "dagq.core.model",
    "TaskDef": "dagq.core.model",
    # running and inspecting
    "Client": "dagq.remote.client",
    "WorkflowClient": "dagq.client",
    "Submitted": "dagq.protocol.http",
    "Settings": "dagq.config",
    "open_backend": "dagq.backends.registry",
    "backend_from_settings": "dagq.wiring",
    # errors
    "DagqError": "dagq.errors",
    "ConfigError": "dagq.errors",
    "DefinitionError": "dagq.errors",
    "Problem": "dagq.errors",
    "ConditionError": "dagq.errors",
    "CronError": "dagq.errors",
    "WorkflowNotFound": "dagq.errors",
    "IdConflict": "dagq.errors",
    "TaskError": "dagq.errors",
    "StoreError": "dagq.errors",
    "StoreUnavailable": "dagq.errors",
}

__all__ = [
    "Chain",
    "Client",
    "ConditionError",
    "ConfigError",
    "CronError",
    "DagqError",
    "DefinitionError",
    "Group",
    "IdConflict",
    "Problem",
    "Settings",
    "StoreError",
    "StoreUnavailable",
    "Submitted",
    "TaskDef",
    "TaskError",
    "WithDelay",
    "Workflow",
    "WorkflowClient",
    "WorkflowDef",
    "WorkflowNotFound",
    "__version__",
    "backend_from_settings",
    "load_file",
    "open_backend",
    "task",
    "workflow_factory",
]

if TYPE_CHECKING:
    from dagq.backends.registry import open_backend
    from dagq.client import WorkflowClient
    from dagq.compose.builder import Chain, Group, WithDelay, Workflow, task
    from dagq.compose.factory import workflow_factory
    from dagq.compose.loader import load_file
    from dagq.config import Settings
    from dagq.core.model import TaskDef, WorkflowDef
    from dagq.errors import (
        ConditionError,
        ConfigError,
        CronError,
        DagqError,
        DefinitionError,
        IdConflict,
        Problem,
        StoreError,
        StoreUnavailable,
        TaskError,
        WorkflowNotFound,
    )
    from dagq.protocol.http import Submitted
    from dagq.remote.client import Client
    from dagq.wiring import backend_from_settings


def __getattr__(name: str) -> Any:
    """Load a public name on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dagq' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

"""Authoring workflows in Python: the builder, its steps, callables and factories.

``from dagq.compose import Chain, Group, WithDelay, Workflow, task``; ``loader`` reads
definition files from disk, ``factory`` builds child workflows from Python factories.
"""

from dagq.compose.builder import (
    Chain,
    Group,
    Step,
    Task,
    WithDelay,
    Workflow,
    task,
)

__all__ = [
    "Chain",
    "Group",
    "Step",
    "Task",
    "WithDelay",
    "Workflow",
    "task",
]

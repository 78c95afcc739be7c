"""The workflow definition model: what a user writes, after parsing and validation.

Pure data: no I/O. Parsers (``dagq.core.parse``), the Python builder and the
``sequentialize_fan_in`` transform all produce these objects; the engine consumes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

DepPolicy = Literal["all", "any"] | int
"""``"all"``, ``"any"`` or an integer N (at least N dependencies must succeed)."""

ResultPolicy = Literal["all_sinks_succeed", "all_tasks_succeed"]

TASK_STATUSES = (
    "pending",
    "ready",
    "running",
    "completed",
    "failed",
    "upstream_failed",
    "skipped",
    "cancelled",
)
TERMINAL_TASK_STATUSES = frozenset(
    {"completed", "failed", "upstream_failed", "skipped", "cancelled"}
)
WORKFLOW_STATUSES = ("pending", "running", "completed", "failed", "cancelled")
TERMINAL_WORKFLOW_STATUSES = frozenset({"completed", "failed", "cancelled"})

DEFAULT_QUEUE = "default"
MERGE_PREFIX = "__merge_"
"""Names of merge nodes made by ``sequentialize_fan_in`` start with this."""


@dataclass(frozen=True)
class SubWorkflow:
    """A task that runs a child workflow instead of a command."""

    definition: WorkflowDef | None = None
    """The child's definition, when given inline or already loaded."""
    path: str | None = None
    """A file the child's definition is read from (relative to the parent's file)."""
    factory: str | None = None
    """``module:function`` returning a definition, called with ``params`` (Python API)."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Parameters handed to the child (``params`` of the child workflow)."""


@dataclass(frozen=True, slots=True)
class TaskDef:
    """One task of a workflow definition."""

    name: str
    """Unique within the workflow; used in conditions, outputs and queries."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """What the worker needs to run the task (``cmd``, ``env``, ``cwd``, ``call``, ...)."""
    depends_on: tuple[str, ...] = ()
    """Names of the tasks this one waits for."""
    queue: str | None = None
    """Queue (hardware class) to run on; ``None`` means the workflow's ``default_queue``."""
    dep_policy: DepPolicy = "all"
    """When the dependencies are satisfied: all succeed, any succeeds, or at least N do."""
    condition: str | None = None
    """Expression over upstream outputs; false means the task is skipped."""
    num_retries: int = 0
    """Retries after a failure; attempts = num_retries + 1."""
    retry_backoff_s: float = 0.0
    """Delay before retry k is ``retry_backoff_s * 2**(k-1)``, capped by ``retry_backoff_max_s``."""
    retry_backoff_max_s: float = 600.0
    """Upper bound of the retry delay."""
    timeout_s: float | None = None
    """Run-time limit of one attempt; ``None`` falls back to ``default_task_timeout_s``."""
    delay_s: float = 0.0
    """Wait this long after the task becomes ready before dispatching it."""
    workflow: SubWorkflow | None = None
    """Set when the task runs a child workflow."""
    merge: bool = False
    """True for merge nodes: the engine completes them itself, no worker involved."""
    kind: str | None = None
    """Explicit task kind (``noop`` for a join); ``None`` infers it (see ``dagq.core.kinds``)."""
    cache: bool | Mapping[str, Any] | None = None
    """Reuse an earlier result with the same cache key (``dagq.core.caching``): ``true``,
    ``false`` or ``{max_age, version, params, files}``; ``None`` follows the workflow."""
    map: Mapping[str, Any] | None = None
    """``{over, max_items, max_parallelism}``: run one instance of the task per item of a
    list known only at run time (see ``dagq.core.mapping``); ``None``: one task."""
    concurrency: Mapping[str, Any] | None = None
    """``{key, limit}``: at most ``limit`` attempts whose key renders the same run at once
    across the store (``dagq.core.concurrency``); ``None`` follows the workflow."""
    priority: str | int | None = None
    """``high``, ``normal`` or ``low`` (or 1, 2, 3): the band of the task's queue that its
    attempts go to (``dagq.core.priority``); ``None`` follows the workflow."""


@dataclass(frozen=True)
class WorkflowDef:
    """A whole workflow definition."""

    name: str
    """Human-readable name (not unique; ids identify runs)."""
    tasks: tuple[TaskDef, ...]
    """The tasks, in definition order."""
    default_queue: str = DEFAULT_QUEUE
    """Queue for tasks that name none."""
    default_task_timeout_s: float | None = None
    """Timeout for tasks that set no ``timeout_s``; ``None`` means no limit."""
    max_parallelism: int | None = None
    """Cap on tasks running at once in this workflow; ``None`` means no cap."""
    result_policy: ResultPolicy = "all_sinks_succeed"
    """What makes the workflow ``completed``; see docs/semantics.md."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Parameters of this run (set by a parent workflow, a schedule or at submit)."""
    description: str | None = None
    """Free text shown in listings."""
    parameters: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Declared parameters: name -> ``{type, default, required, description}``."""
    cache: bool | Mapping[str, Any] | None = None
    """The ``cache`` of every task that sets none (``None``: no caching)."""
    concurrency: Mapping[str, Any] | None = None
    """The ``concurrency`` of every task that sets none (``None``: no key)."""
    priority: str | int | None = None
    """The ``priority`` of every task that sets none (``None``: normal)."""
    on_finish: Mapping[str, Any] | None = None
    """Hooks fired when a run reaches any terminal status: ``{webhook: {url,
    secret_env}, event: true, task: {name, kwargs, ...}}`` (``dagq.core.hooks``,
    docs/notifications.md); ``None``: none."""
    on_failure: Mapping[str, Any] | None = None
    """Hooks fired when a run reaches ``failed`` (same shape as ``on_finish``); the
    ``task`` is the exit handler."""

    def queue_of(self, task: TaskDef) -> str:
        """The queue ``task`` runs on."""
        return task.queue or self.default_queue

    def timeout_of(self, task: TaskDef) -> float | None:
        """The effective timeout of one attempt of ``task``."""
        return task.timeout_s if task.timeout_s is not None else self.default_task_timeout_s

    def task(self, name: str) -> TaskDef:
        """The task called ``name`` (KeyError if absent); O(1) after the first call."""
        find = getattr(self.tasks, "task", None)  # decoded tasks look themselves up
        return find(name) if find is not None else self._by_name[name]

    @cached_property
    def _by_name(self) -> Mapping[str, TaskDef]:
        return {t.name: t for t in self.tasks}


@dataclass(frozen=True)
class OutputRef:
    """A task output kept in output storage instead of inline in the state."""

    name: str
    """Object name in output storage, e.g. ``outputs/WF/TASK/ATTEMPT.json``."""
    md5: str
    """Hex MD5 of the stored bytes, checked on every read."""
    size: int
    """Size in bytes."""


class MappedOutputs(list[Any]):
    """The outputs of a mapped task's instances in item order (``None`` for an instance
    that did not complete), as a dependent task's input; values may be ``OutputRef``s
    still to be read."""

"""The workflow engine: the state machine, its state and its versioned encoding.

``api`` holds the entry points (create/start/apply/cancel/retry/expire); ``step`` the
per-batch state machine, ``graph`` the compiled DAG, ``types`` the values passed in and
out, ``state`` the runtime state and ``codec``/``defcodec`` its binary form.
"""

from dagq.core.engine.api import (
    ChildSubmit,
    Completion,
    Dispatch,
    Effects,
    OutboxEntry,
    ParentLink,
    ParentNotice,
    TaskView,
    WorkflowState,
    apply,
    attempt_key,
    cancel,
    cancel_unstarted,
    child_workflow_id,
    clear_outbox,
    create,
    dumps,
    expire,
    judge_attempt,
    loads,
    outbox_due,
    resume,
    retry,
    start,
    stopping_keys,
    waiting_dispatches,
)

__all__ = [
    "ChildSubmit",
    "Completion",
    "Dispatch",
    "Effects",
    "OutboxEntry",
    "ParentLink",
    "ParentNotice",
    "TaskView",
    "WorkflowState",
    "apply",
    "attempt_key",
    "cancel",
    "cancel_unstarted",
    "child_workflow_id",
    "clear_outbox",
    "create",
    "dumps",
    "expire",
    "judge_attempt",
    "loads",
    "outbox_due",
    "resume",
    "retry",
    "start",
    "stopping_keys",
    "waiting_dispatches",
]

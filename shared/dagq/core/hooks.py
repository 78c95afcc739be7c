"""Workflow hooks: ``on_finish`` and ``on_failure`` (a webhook, an event, an exit handler task).

``on_finish`` fires when a run reaches any terminal status (``completed``, ``failed``,
``cancelled``), ``on_failure`` only when it reaches ``failed``. Each names any of::

    webhook: {url: https://..., secret_env: NAME}   # a signed HTTP POST (dagq.runtime.notify)
    event: true                                     # one message on the store's ``events`` queue
    task: {name: NAME, kwargs: {...}, queue: Q}     # an exit handler run as its own workflow

This module is the pure part: validation of the fields, which hooks a status fires, the
summary the engine keeps in the outbox (``NotifyEvent``), the event body every hook
carries, and the definition of an exit handler's run. See docs/notifications.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from dagq.core.error_summary import error_summary
from dagq.core.model import TaskDef, WorkflowDef
from dagq.core.rules import describe, queue_problem, task_name_problem
from dagq.core.task_checks import task_problems

HOOKS = ("on_finish", "on_failure")
"""The workflow fields that hold hooks."""
FIRES: dict[str, frozenset[str]] = {
    "on_finish": frozenset({"completed", "failed", "cancelled"}),
    "on_failure": frozenset({"failed"}),
}
"""The terminal statuses each hook field fires on."""
DEFAULT_SECRET_ENV = "DAGQ_WEBHOOK_SECRET"
"""The environment variable (app setting) holding a webhook's signing secret by default."""
SUMMARY_INPUT = "workflow"
"""The name under which an exit handler finds the failed run's summary in its inputs."""
MAX_FAILED_LISTED = 20
"""Failed tasks listed by name in one event (``failed_total`` counts them all)."""
MAX_ERROR_CHARS = 500
"""Longest error summary of one failed task in an event."""
MAX_URL_CHARS = 2048

_HOOK_KEYS = frozenset({"webhook", "event", "task"})
_WEBHOOK_KEYS = frozenset({"url", "secret_env"})
_HANDLER_KEYS = frozenset({"name", "kwargs", "queue", "kind", "timeout_s", "num_retries",
                           "retry_backoff_s", "retry_backoff_max_s"})
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_HTTPS = re.compile(r"https://(?P<host>[^/?#@\s]+)(?:[/?][^#\s]*)?")
_LOCAL = re.compile(r"http://(?P<host>localhost|127\.0\.0\.1|\[::1\])(?::\d{1,5})?(?:[/?][^#\s]*)?")


def has_hooks(defn: WorkflowDef) -> bool:
    """True when ``defn`` sets any hook (the engine asks only at a terminal status)."""
    return bool(defn.on_finish or defn.on_failure)


def fired(defn: WorkflowDef, status: str) -> list[tuple[str, Mapping[str, Any]]]:
    """``(field, hook)`` of every hook that reaching ``status`` fires, in field order."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    for name in HOOKS:
        hook = getattr(defn, name)
        if isinstance(hook, Mapping) and hook and status in FIRES[name]:
            out.append((name, hook))
    return out


def url_problem(url: object) -> str | None:
    """Why ``url`` cannot be a webhook address, or None: ``https://`` only (``http://``
    only to localhost, for tests), no credentials, no fragment."""
    if not isinstance(url, str) or not url:
        return f"webhook url must be a non-empty string, got {describe(url)}"
    if len(url) > MAX_URL_CHARS:
        return f"webhook url is longer than {MAX_URL_CHARS} characters"
    authority = url.partition("://")[2].split("/", 1)[0].split("?", 1)[0]
    if "@" in authority:
        return "webhook url must not carry credentials (user:password@); use secret_env"
    if _HTTPS.fullmatch(url) or _LOCAL.fullmatch(url):
        return None
    return (f"webhook url must be https://HOST/... (http:// only to localhost), got "
            f"{url[:80]!r}")


def problems(defn: WorkflowDef) -> Iterator[tuple[str, str]]:
    """``(message, field path)`` for everything wrong with the hooks of ``defn``."""
    for field in HOOKS:
        yield from spec_problems(field, getattr(defn, field))


def spec_problems(field: str, value: object) -> Iterator[tuple[str, str]]:
    """``(message, field path)`` for everything wrong with hook field ``field``."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        yield (f"{field} must be a mapping of webhook, event and task, got "
               f"{describe(value)}", field)
        return
    for key in value:
        if key not in _HOOK_KEYS:
            yield (f"unknown field {key!r} in {field} (expected webhook, event or task)",
                   f"{field}.{key}")
    if not value:
        yield f"{field} names no hook: give a webhook, event or task", field
    if "event" in value and not isinstance(value["event"], bool):
        yield f"{field}.event must be true or false, got {describe(value['event'])}", \
            f"{field}.event"
    if "webhook" in value:
        yield from _webhook_problems(f"{field}.webhook", value["webhook"])
    if "task" in value:
        yield from _handler_problems(f"{field}.task", value["task"])


def _webhook_problems(at: str, hook: object) -> Iterator[tuple[str, str]]:
    if not isinstance(hook, Mapping):
        yield f"{at} must be a mapping {{url, secret_env}}, got {describe(hook)}", at
        return
    for key in hook:
        if key not in _WEBHOOK_KEYS:
            yield f"unknown field {key!r} in {at} (expected url, secret_env)", f"{at}.{key}"
    if (problem := url_problem(hook.get("url"))) is not None:
        yield problem, f"{at}.url"
    env = hook.get("secret_env", DEFAULT_SECRET_ENV)
    if not isinstance(env, str) or not _ENV_NAME.fullmatch(env):
        yield (f"{at}.secret_env must name an environment variable (the secret itself is "
               f"never written in a definition), got {describe(env)}", f"{at}.secret_env")


def _handler_problems(at: str, spec: object) -> Iterator[tuple[str, str]]:
    if not isinstance(spec, Mapping):
        yield f"{at} must be a task mapping {{name, kwargs, ...}}, got {describe(spec)}", at
        return
    for key in spec:
        if key not in _HANDLER_KEYS:
            yield (f"unknown field {key!r} in {at} (expected one of "
                   f"{', '.join(sorted(_HANDLER_KEYS))})", f"{at}.{key}")
    name = spec.get("name")
    if (problem := task_name_problem(name)) is not None:
        yield problem, f"{at}.name"
    elif name == SUMMARY_INPUT:
        yield f"{at}.name {name!r} is reserved for the summary input", f"{at}.name"
    if "queue" in spec and (problem := queue_problem(spec["queue"])) is not None:
        yield problem, f"{at}.queue"
    if not isinstance(spec.get("kwargs", {}), Mapping):
        yield f"{at}.kwargs must be a mapping, got {describe(spec.get('kwargs'))}", \
            f"{at}.kwargs"
        return
    if any(key not in _HANDLER_KEYS for key in spec) or not isinstance(name, str):
        return
    try:
        task = handler_task(spec)
    except (TypeError, ValueError) as exc:
        yield f"{at} is not a valid task: {exc}", at
        return
    for message, where in task_problems(task):
        yield message, f"{at}.{where}"


def handler_task(spec: Mapping[str, Any]) -> TaskDef:
    """The exit handler's task, depending on the summary input."""
    fields = {k: v for k, v in spec.items() if k not in ("name", "kwargs")}
    return TaskDef(name=spec["name"], kwargs=dict(spec.get("kwargs", {})),
                   depends_on=(SUMMARY_INPUT,), **fields)


def handler_definition(defn: WorkflowDef, field: str, spec: Mapping[str, Any]) -> WorkflowDef:
    """The run of an exit handler: a ``workflow`` task (seeded with the summary, never
    run) and the handler after it, with the workflow's queue and parameters; no hooks."""
    summary = TaskDef(name=SUMMARY_INPUT, kind="noop")
    return WorkflowDef(name=f"{defn.name}.{field}", tasks=(summary, handler_task(spec)),
                       default_queue=defn.default_queue, params=dict(defn.params),
                       description=f"{field} handler of a {defn.name} run")


def failure_list(names: Sequence[str], codes: Sequence[int], attempts: Sequence[int],
                 errors: Sequence[str | None], failed: int
                 ) -> tuple[tuple[tuple[str, int, str | None], ...], int]:
    """The tasks whose status code is ``failed`` as ``(task, attempt, error summary)``,
    the first ``MAX_FAILED_LISTED`` of them, and how many there are in all."""
    out: list[tuple[str, int, str | None]] = []
    total = 0
    for i, code in enumerate(codes):
        if code != failed:
            continue
        total += 1
        if len(out) < MAX_FAILED_LISTED:
            line = error_summary(errors[i])
            out.append((names[i], attempts[i],
                        line[:MAX_ERROR_CHARS] if line is not None else None))
    return tuple(out), total


def event_type(status: str) -> str:
    """The event's ``type``: ``dagq.workflow.completed``, ``.failed`` or ``.cancelled``."""
    return f"dagq.workflow.{status}"


def event_data(workflow_id: str, name: str, status: str, counts: Mapping[str, int],
               failed: Sequence[Sequence[Any]], failed_total: int, created_at: float,
               finished_at: float, handlers: Mapping[str, str]) -> dict[str, Any]:
    """The ``data`` of one event (the same for the webhook body and the events queue)."""
    return {
        "workflow_id": workflow_id, "name": name, "status": status,
        "counts": dict(counts),
        "failed_tasks": [{"task": t, "attempt": a, "error": e} for t, a, e in failed],
        "failed_total": failed_total,
        "created_at": created_at, "finished_at": finished_at,
        "duration_s": round(max(0.0, finished_at - created_at), 3),
        "handlers": dict(handlers),
    }

"""Queue message bodies: task messages, completions and control requests (JSON, UTF-8).

The wire format is described in docs/architecture.md; decoding is strict and raises
``BadMessage`` with the reason, so a malformed message is dead-lettered, never retried.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from dagq.core.model import OutputRef
from dagq.errors import BadMessage

VERSION = 1
REF_KEY = "$dagq_ref"
"""Key marking an output reference inside ``inputs`` of a task message."""
MAX_TASK_MESSAGE_BYTES = 48 * 1024
"""Inline inputs that would push a task message past this go to output storage."""

ControlAction = Literal["start", "cancel", "retry", "suspend", "resume"]
CONTROL_ACTIONS = ("start", "cancel", "retry", "suspend", "resume")
T = TypeVar("T")


def ref_to_json(ref: OutputRef) -> dict[str, Any]:
    """An ``OutputRef`` as the JSON object used in messages."""
    return {REF_KEY: {"name": ref.name, "md5": ref.md5, "size": ref.size}}


def ref_from_json(value: Any) -> OutputRef | None:
    """The ``OutputRef`` inside ``value`` if it is a reference object, else ``None``."""
    if isinstance(value, dict) and len(value) == 1 and REF_KEY in value:
        raw = value[REF_KEY]
        try:
            return OutputRef(str(raw["name"]), str(raw["md5"]), int(raw["size"]))
        except (KeyError, TypeError, ValueError):
            raise BadMessage(f"malformed output reference: {raw!r}") from None
    return None


@dataclass(frozen=True)
class TaskMessage:
    """What a worker receives for one attempt of one task."""

    workflow_id: str
    """The workflow the task belongs to."""
    task: str
    """Task name."""
    attempt: int
    """Attempt number, from 1."""
    key: str
    """Deterministic dispatch id ``workflow/task/attempt`` (also the message id)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """The task's kwargs from the definition."""
    timeout_s: float | None = None
    """Run-time limit of this attempt."""
    inputs: dict[str, Any] = field(default_factory=dict)
    """Direct upstream outputs (values, or reference objects for large ones)."""
    inputs_ref: OutputRef | None = None
    """Where ``inputs`` were stored when too large to inline."""
    params: dict[str, Any] = field(default_factory=dict)
    """Workflow parameters (from a parent workflow or a schedule)."""
    payload_ref: OutputRef | None = None
    """Where ``kwargs``, ``inputs`` and ``params`` were stored together when the message
    would not fit its queue otherwise (``dagq.protocol.outputs.expand`` brings them back)."""
    mapped: bool = False
    """True for an instance of a mapped task (``item`` is then its item)."""
    item: Any = None
    """The item of a mapped task's instance (any JSON value)."""
    cache: dict[str, Any] | None = None
    """For a task that uses the cache: ``{"key", "components", "workflow"}``; the worker
    stores a successful result under the key (``dagq.protocol.cache``)."""

    def encode(self) -> bytes:
        """The message body."""
        body: dict[str, Any] = {
            "v": VERSION, "type": "task", "workflow_id": self.workflow_id,
            "task": self.task, "attempt": self.attempt, "key": self.key,
            "kwargs": self.kwargs, "timeout_s": self.timeout_s, "inputs": self.inputs,
            "inputs_ref": ref_to_json(self.inputs_ref) if self.inputs_ref else None,
        }
        if self.params:
            body["params"] = self.params
        if self.payload_ref is not None:
            body["payload_ref"] = ref_to_json(self.payload_ref)
        if self.mapped:
            body["item"] = self.item
        if self.cache is not None:
            body["cache"] = self.cache
        return _dumps(body)


@dataclass(frozen=True)
class CompletionMessage:
    """A worker's (or a child workflow's) report of one attempt's end."""

    workflow_id: str
    """The workflow the task belongs to."""
    task: str
    """Task name."""
    attempt: int
    """Attempt number the worker ran."""
    success: bool
    """True if the task succeeded."""
    output: Any = None
    """Inline output (JSON value) when small."""
    output_ref: OutputRef | None = None
    """Where a large output was stored."""
    error: str | None = None
    """Why the attempt failed (exit code and stderr tail, exception, ...)."""
    released: bool = False
    """True if the worker gave the task back unrun or interrupted (preemption)."""
    worker: str | None = None
    """``host:pid`` of the worker."""
    duration_s: float | None = None
    """Run time of the attempt."""
    cached: str | None = None
    """For a result taken from the cache: ``run/task/attempt`` it came from."""

    def encode(self) -> bytes:
        """The message body."""
        extra = {"cached": self.cached} if self.cached else {}
        return _dumps({
            "v": VERSION, "type": "completion", "workflow_id": self.workflow_id,
            "task": self.task, "attempt": self.attempt, "success": self.success,
            "output": self.output,
            "output_ref": ref_to_json(self.output_ref) if self.output_ref else None,
            "error": self.error, "released": self.released, "worker": self.worker,
            "duration_s": self.duration_s, **extra,
        })


@dataclass(frozen=True)
class ControlMessage:
    """A request to start, cancel or retry a workflow, applied by the coordinator."""

    workflow_id: str
    """Target workflow."""
    action: ControlAction
    """What to do."""
    request_id: str
    """Unique per request; makes ``retry`` idempotent."""
    parent_attempt: int | None = None
    """For a retried child workflow: the parent task's new attempt it now reports to."""
    applied: bool = False
    """True when the sender already applied the action to the stored state (cancel and
    retry do): the coordinator then only sends the outbox entries named in ``send``."""
    send: tuple[str, ...] = ()
    """Outbox keys the sender's state write recorded, for the coordinator to send."""

    def encode(self) -> bytes:
        """The message body."""
        body: dict[str, Any] = {"v": VERSION, "type": "control",
                                "workflow_id": self.workflow_id, "action": self.action,
                                "request_id": self.request_id}
        if self.parent_attempt is not None:
            body["parent_attempt"] = self.parent_attempt
        if self.applied:
            body["applied"] = True
        if self.send:
            body["send"] = list(self.send)
        return _dumps(body)


CompletionQueueMessage = CompletionMessage | ControlMessage


def _dumps(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def _load(data: bytes | str) -> dict[str, Any]:
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:  # also an integer over 4300 digits
        raise BadMessage(f"message is not JSON: {exc}") from None
    except RecursionError:
        raise BadMessage("message is nested too deeply to decode") from None
    if not isinstance(body, dict):
        raise BadMessage("message is not a JSON object")
    if body.get("v") != VERSION:
        raise BadMessage(f"unsupported message version {body.get('v')!r} (expected {VERSION})")
    return body


def _str(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise BadMessage(f"field {key!r} must be a non-empty string, got {value!r}")
    return value


def _attempt(body: dict[str, Any]) -> int:
    value = body.get("attempt")
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise BadMessage(f"field 'attempt' must be an integer >= 1, got {value!r}")
    return value


def decode_task(data: bytes | str) -> TaskMessage:
    """Parse a task-queue message; raises ``BadMessage``."""
    body = _load(data)
    if body.get("type") != "task":
        raise BadMessage(f"expected a task message, got type {body.get('type')!r}")
    kwargs = body.get("kwargs") or {}
    inputs = body.get("inputs") or {}
    if not isinstance(kwargs, dict) or not isinstance(inputs, dict):
        raise BadMessage("fields 'kwargs' and 'inputs' must be JSON objects")
    timeout = body.get("timeout_s")
    raw_ref = body.get("inputs_ref")
    payload = body.get("payload_ref")
    return TaskMessage(
        workflow_id=_str(body, "workflow_id"), task=_str(body, "task"),
        attempt=_attempt(body), key=_str(body, "key"), kwargs=kwargs,
        timeout_s=float(timeout) if isinstance(timeout, int | float) else None,
        inputs=inputs, inputs_ref=ref_from_json(raw_ref) if raw_ref else None,
        params=body.get("params") or {},
        payload_ref=ref_from_json(payload) if payload else None,
        mapped="item" in body, item=body.get("item"),
        cache=body["cache"] if isinstance(body.get("cache"), dict) else None,
    )


def decode_completion_queue(data: bytes | str) -> CompletionQueueMessage:
    """Parse a completion-queue message (completion or control); raises ``BadMessage``."""
    body = _load(data)
    kind = body.get("type")
    if kind == "control":
        action = body.get("action")
        if action not in CONTROL_ACTIONS:
            raise BadMessage(f"unknown control action {action!r}")
        pa = body.get("parent_attempt")
        if pa is not None and (not isinstance(pa, int) or isinstance(pa, bool) or pa < 1):
            raise BadMessage(f"field 'parent_attempt' must be an integer >= 1, got {pa!r}")
        send = body.get("send", [])
        if not isinstance(send, list) or not all(isinstance(k, str) for k in send):
            raise BadMessage(f"field 'send' must be a list of outbox keys, got {send!r}")
        return ControlMessage(_str(body, "workflow_id"), action, _str(body, "request_id"), pa,
                              applied=body.get("applied") is True, send=tuple(send))
    if kind != "completion":
        raise BadMessage(f"expected a completion or control message, got type {kind!r}")
    success = body.get("success")
    if not isinstance(success, bool):
        raise BadMessage(f"field 'success' must be true or false, got {success!r}")
    raw_ref = body.get("output_ref")
    error = body.get("error")
    duration = body.get("duration_s")
    return CompletionMessage(
        workflow_id=_str(body, "workflow_id"), task=_str(body, "task"),
        attempt=_attempt(body), success=success, output=body.get("output"),
        output_ref=ref_from_json(raw_ref) if raw_ref else None,
        error=str(error) if error is not None else None,
        released=bool(body.get("released", False)),
        worker=body.get("worker") if isinstance(body.get("worker"), str) else None,
        duration_s=float(duration) if isinstance(duration, int | float) else None,
        cached=body["cached"] if isinstance(body.get("cached"), str) else None,
    )


_STR = rb'"(?:[^"\\]|\\.)*"'
_HEAD = re.compile(rb'\{"v":1,"type":"completion","workflow_id":(' + _STR + rb'),"task":('
                   + _STR + rb'),"attempt":([1-9][0-9]{0,8}),')


def attempt_named_in(data: bytes | str) -> tuple[str, str, int] | None:
    """``(workflow, task, attempt)`` from the head of a completion that does not decode
    as a whole (e.g. its output is nested too deeply), if ``encode`` wrote that head."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    match = _HEAD.match(raw[:4096])
    if match is None:
        return None
    try:
        workflow_id, task = (json.loads(g) for g in match.group(1, 2))
    except ValueError:
        return None
    if not isinstance(workflow_id, str) or not isinstance(task, str):
        return None
    return workflow_id, task, int(match.group(3))


@dataclass
class Grouped(Generic[T]):
    """Completion-queue messages decoded and grouped by workflow, in arrival order."""

    groups: dict[str, list[tuple[T, CompletionQueueMessage]]] = field(default_factory=dict)
    """Decoded messages of each workflow, each beside the handle it came with."""
    rejected: list[tuple[T, str]] = field(default_factory=list)
    """Handles of the messages that could not be decoded, with the reason."""


def decode_and_group(items: Iterable[tuple[T, bytes | str]]) -> Grouped[T]:
    """Decode ``(handle, body)`` pairs and group them by workflow id.

    The coordinator loop and the Functions triggers both start a batch with this; a
    handle is whatever the caller needs to settle the message later.
    """
    out: Grouped[T] = Grouped()
    for handle, body in items:
        try:
            decoded = decode_completion_queue(body)
        except BadMessage as exc:
            out.rejected.append((handle, str(exc)))
            continue
        out.groups.setdefault(decoded.workflow_id, []).append((handle, decoded))
    return out

"""Publishing one attempt's result: the output made canonical, the completion sized to fit.

The worker is the one place a task's output enters dagq, so it is checked here, once:
the output file must hold one canonical JSON value (``dagq.core.values``: valid UTF-8,
finite numbers, integers of at most 4300 digits, at most 64 levels of nesting). An output
outside those rules fails the attempt with the rule it broke; the completion reporting
that is an ordinary failure, so the attempt is never run again because of it.

Sizes are checked on what is sent: an output whose canonical encoding is over
``INLINE_OUTPUT_LIMIT`` goes to output storage, and so does a smaller one if the encoded
completion would still not fit the completion queue (``Queue.max_message_bytes``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dagq.core import paths, values
from dagq.core.error_summary import clip_error
from dagq.core.model import OutputRef
from dagq.ports import Backend
from dagq.protocol.messages import CompletionMessage, TaskMessage

INLINE_OUTPUT_LIMIT = 32 * 1024
"""Largest canonical output carried inside the completion message."""
MAX_OUTPUT_BYTES = 256 * 1024 * 1024
"""Largest output file a worker reads."""
MAX_ERROR_CHARS = 4000
"""Longest error text sent (its tail: the end of stderr says the most)."""
OUTPUT_FILE = "the task's output file ($DAGQ_OUTPUT_FILE)"
RULES = (f"write one JSON value: valid UTF-8, finite numbers, integers of at most "
         f"{values.MAX_INT_DIGITS} digits, at most {values.MAX_DEPTH} levels of nesting")


def output_name(task: TaskMessage) -> str:
    """Where a large output of ``task``'s attempt is stored."""
    return paths.output_name(task.workflow_id, task.task, task.attempt)


def completion(backend: Backend, task: TaskMessage, success: bool, error: str | None,
               output_file: Path, worker_id: str, limit: int,
               duration_s: float | None = None) -> tuple[CompletionMessage, bytes]:
    """The completion of ``task``'s attempt and its encoded body (at most ``limit``
    bytes); a large output is stored first. Store errors propagate (transient)."""
    output: object = None
    ref: OutputRef | None = None
    if success and output_file.exists() and output_file.stat().st_size > 0:
        size = output_file.stat().st_size
        try:
            if size > MAX_OUTPUT_BYTES:
                raise values.ValueRejected(
                    f"{OUTPUT_FILE} is {size} bytes; the limit is {MAX_OUTPUT_BYTES}")
            value = values.loads(output_file.read_bytes(), OUTPUT_FILE)
        except values.ValueRejected as exc:
            success, error = False, f"{exc}; {RULES}"
        else:
            data = values.dumps(value)
            if len(data) <= INLINE_OUTPUT_LIMIT:
                output = value
            else:
                ref = _stash(backend, task, data)
    msg = CompletionMessage(
        task.workflow_id, task.task, task.attempt, success=success, output=output,
        output_ref=ref, error=_clip(error, MAX_ERROR_CHARS) if error else None,
        worker=worker_id, duration_s=duration_s)
    body = msg.encode()
    if len(body) > limit and output is not None:
        msg = replace(msg, output=None, output_ref=_stash(backend, task, values.dumps(output)))
        body = msg.encode()
    if len(body) > limit and msg.error:
        msg = replace(msg, error=_clip(msg.error, 500))
        body = msg.encode()
    return msg, body


def _clip(error: str, limit: int) -> str:
    """``error`` as valid UTF-8 in ``limit`` characters, its header and end kept (what
    its error summary reads)."""
    return values.utf8_text(clip_error(error, limit), limit)


def _stash(backend: Backend, task: TaskMessage, data: bytes) -> OutputRef:
    name = output_name(task)
    return OutputRef(name, backend.outputs.put(name, data), len(data))

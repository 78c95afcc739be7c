"""Processors decide how a task runs. A processor gets a ``TaskContext`` and returns an
``Outcome``; the worker does everything around it (messages, outputs, cancellation).

Write your own by subclassing ``Processor`` and start workers with
``dagq worker QUEUE --processor package.module:Class``; see docs/tasks.md.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagq.core.kinds import TaskKind
from dagq.protocol.messages import TaskMessage
from dagq.worker.process import ProcessResult, run_process

log = logging.getLogger("dagq.worker")


@dataclass
class TaskContext:
    """Everything a processor may use to run one attempt of one task."""

    message: TaskMessage
    """The task message (kwargs, attempt, inputs as received)."""
    env: dict[str, str]
    """Environment for the task: the worker's plus the script contract variables."""
    workdir: Path
    """A private directory for this attempt (removed afterwards)."""
    output_file: Path
    """Where the task writes one JSON value to publish an output."""
    inputs_file: Path
    """JSON object of the direct upstream outputs (large ones already fetched)."""
    log_path: Path
    """Combined stdout/stderr log of the attempt."""
    stop: threading.Event
    """Set when the task must stop (cancel or worker shutdown)."""
    kill_timeout: float
    """Seconds between SIGTERM and SIGKILL."""
    on_start: Callable[[int], None] | None = None
    """Called with the pid of a started process (for observers and tests)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Room for processor-specific data."""


@dataclass(frozen=True)
class Outcome:
    """How an attempt ended."""

    success: bool
    """True if the task succeeded (its output, if any, is in the output file)."""
    error: str | None = None
    """Why it failed."""
    stopped: bool = False
    """True if it was stopped on request rather than failing by itself."""
    exit_code: int | None = field(default=None, compare=False)
    """The task process's exit code (negative: the signal that killed it), when known."""
    timed_out: bool = field(default=False, compare=False)
    """True if it was stopped because its timeout passed."""


class Processor:
    """Base class: run one task attempt.

    A processor that reads ``kwargs`` keys of its own declares them as ``task_kind``
    (a ``dagq.core.kinds.TaskKind``) so that definitions using them validate; name it
    in ``DAGQ_TASK_KINDS`` for the processes that validate (CLI, coordinator).
    """

    task_kind: TaskKind | None = None
    """The kind of task this processor runs and the ``kwargs`` keys it reads, if any."""

    def handles(self, message: TaskMessage) -> bool:
        """True if this processor can run ``message`` (first match wins)."""
        return True

    def run(self, ctx: TaskContext) -> Outcome:
        """Run the task and report how it ended."""
        raise NotImplementedError


def outcome_of(result: ProcessResult, ctx: TaskContext, what: str) -> Outcome:
    """Map a finished process to an ``Outcome`` with a helpful error."""
    code = result.returncode
    if code == 0 and not result.stopped:
        return Outcome(True, exit_code=0)
    if result.stopped:
        return Outcome(False, f"{what} was stopped (cancelled or worker shutting down)",
                       stopped=True, exit_code=code)
    if result.timed_out:
        return Outcome(False, f"{what} timed out after {ctx.message.timeout_s:g}s\n"
                              f"{result.tail}".rstrip(), exit_code=code, timed_out=True)
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    return Outcome(False, f"{what} {how}\n{result.tail}".rstrip(), exit_code=code)


class ShellProcessor(Processor):
    """Runs ``kwargs.cmd`` through ``/bin/sh -c`` with ``env`` and ``cwd``; ignores other keys."""

    def handles(self, message: TaskMessage) -> bool:
        return "cmd" in message.kwargs

    def run(self, ctx: TaskContext) -> Outcome:
        kwargs = ctx.message.kwargs
        cmd = kwargs.get("cmd")
        if not isinstance(cmd, str) or not cmd.strip():
            return Outcome(False, "kwargs.cmd must be a non-empty string")
        env = dict(ctx.env)
        extra_env = kwargs.get("env") or {}
        if not isinstance(extra_env, dict):
            return Outcome(False, "kwargs.env must be a mapping of names to strings")
        env.update({str(k): str(v) for k, v in extra_env.items()})
        cwd = kwargs.get("cwd")
        if cwd is not None and not Path(str(cwd)).is_dir():
            return Outcome(False, f"kwargs.cwd {cwd!r} is not a directory on this worker")
        result = run_process(
            ["/bin/sh", "-c", cmd], env=env, cwd=str(cwd) if cwd else None,
            log_path=ctx.log_path, stop=ctx.stop, timeout_s=ctx.message.timeout_s,
            kill_timeout=ctx.kill_timeout, on_start=ctx.on_start,
        )
        return outcome_of(result, ctx, "command")


class NoopProcessor(Processor):
    """Succeeds at once; runs tasks that have neither ``cmd`` nor ``call``."""

    def run(self, ctx: TaskContext) -> Outcome:
        return Outcome(True)


def run_with(processors: list[Processor], ctx: TaskContext) -> Outcome:
    """Run ``ctx``'s task with the first of ``processors`` that handles it; a processor
    that raises fails the task, not the worker."""
    for proc in processors:
        if proc.handles(ctx.message):
            try:
                return proc.run(ctx)
            except Exception as exc:
                log.exception("processor %s crashed on %s", type(proc).__name__,
                              ctx.message.key)
                return Outcome(False, f"processor {type(proc).__name__} crashed: {exc!r}")
    return Outcome(False, "no processor on this worker can run this task "
                          "(it has neither kwargs.cmd nor kwargs.call)")

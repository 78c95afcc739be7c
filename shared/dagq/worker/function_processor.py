"""Runs Python function tasks (``kwargs.call`` = ``package.module:function``).

Each attempt runs in a fresh process of the worker's own Python
(``python -m dagq.worker.call_runner``) started through ``run_process``, so
isolation, memory, timeouts, cancellation and kill escalation are those of shell tasks,
and the function sees the same ``DAGQ_*`` environment as a script.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from dagq.compose.callables import CALL_RE
from dagq.protocol.messages import TaskMessage
from dagq.worker.process import run_process
from dagq.worker.processors import Outcome, Processor, TaskContext, outcome_of

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
"""The folder that holds the ``dagq`` package (put on the task process's path)."""
TRACEBACK_TAIL = 3000
"""Characters of the log's end (the traceback) added to an exception's error."""


class FunctionProcessor(Processor):
    """Calls ``kwargs.call`` with ``kwargs.args``; its return value is the task output.

    Also honours ``kwargs.env`` and ``kwargs.cwd`` (the process's working directory, put
    first on ``sys.path`` ahead of the worker's own working directory).
    """

    def handles(self, message: TaskMessage) -> bool:
        return "call" in message.kwargs

    def run(self, ctx: TaskContext) -> Outcome:
        kwargs = ctx.message.kwargs
        call, args = kwargs.get("call"), kwargs.get("args", {})
        if not isinstance(call, str) or not CALL_RE.fullmatch(call):
            return Outcome(False, f"kwargs.call must look like 'package.module:function', "
                                  f"got {call!r}")
        if not isinstance(args, Mapping):
            return Outcome(False, f"kwargs.args must be a mapping of argument names to "
                                  f"values, got {type(args).__name__}")
        extra_env = kwargs.get("env") or {}
        if not isinstance(extra_env, Mapping):
            return Outcome(False, "kwargs.env must be a mapping of names to strings")
        cwd = kwargs.get("cwd")
        if cwd is not None and not Path(str(cwd)).is_dir():
            return Outcome(False, f"kwargs.cwd {cwd!r} is not a directory on this worker")
        sys_path = [str(Path(str(cwd)).resolve())] if cwd is not None else []
        sys_path.append(os.getcwd())
        error_file = ctx.workdir / "call-error.txt"
        spec_file = ctx.workdir / "call.json"
        spec_file.write_text(json.dumps({"call": call, "args": dict(args),
                                         "sys_path": sys_path, "error_file": str(error_file)}))
        env = dict(ctx.env)
        env.update({str(k): str(v) for k, v in extra_env.items()})
        # the runner module must import even when the task's cwd hides the worker's tree
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
        result = run_process(
            [sys.executable, "-m", "dagq.worker.call_runner", str(spec_file)], env=env,
            cwd=str(cwd) if cwd is not None else None, log_path=ctx.log_path, stop=ctx.stop,
            timeout_s=ctx.message.timeout_s, kill_timeout=ctx.kill_timeout,
            on_start=ctx.on_start,
        )
        if result.returncode != 0 and not (result.stopped or result.timed_out) \
                and error_file.exists():
            message = error_file.read_text()
            tail = result.tail.rstrip().removesuffix(f"dagq: {message}").rstrip()
            tail = tail[-TRACEBACK_TAIL:]
            return Outcome(False, f"{message}\n{tail}" if tail else message,
                           exit_code=result.returncode)
        return outcome_of(result, ctx, f"function {call}")

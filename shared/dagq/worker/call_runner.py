"""Runs one Python function task: ``python -m dagq.worker.call_runner SPEC_FILE``.

Started by ``FunctionProcessor`` in a fresh process with the script-contract
environment. ``SPEC_FILE`` is JSON: ``call`` (``module:qualname``), ``args``,
``sys_path`` (directories to put first on ``sys.path``) and ``error_file``. The return
value (JSON) goes to ``$DAGQ_OUTPUT_FILE``; ``None`` publishes nothing. On failure the
one-line reason goes to ``error_file``, the traceback to stderr, and the exit code is
non-zero.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import traceback
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

EXIT_EXCEPTION = 1
"""The function raised."""
EXIT_CANNOT_CALL = 2
"""The function could not be imported or called with its arguments."""
EXIT_BAD_OUTPUT = 3
"""The return value is not JSON-serialisable."""
MAX_MESSAGE = 2000


def main(argv: list[str]) -> int:
    """Run the task described by ``argv[1]``; the process exit code."""
    if len(argv) != 2:
        print("usage: python -m dagq.worker.call_runner SPEC_FILE", file=sys.stderr)
        return EXIT_CANNOT_CALL
    spec = json.loads(Path(argv[1]).read_text())
    error_file = Path(spec["error_file"])
    call: str = spec["call"]
    for entry in reversed(spec.get("sys_path") or []):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    from dagq.compose.callables import INPUTS_PARAMETER, bind_problem, resolve_call, wants_inputs

    try:
        fn = resolve_call(call)
    except Exception as exc:  # any import-time error of the user's module
        _print_import_traceback(exc, call)
        return _fail(error_file, f"cannot import {call!r}: {_reason(exc)}", EXIT_CANNOT_CALL)
    args: dict[str, Any] = dict(spec.get("args") or {})
    if wants_inputs(fn) and INPUTS_PARAMETER not in args:
        args[INPUTS_PARAMETER] = _inputs()
    item = os.environ.get("DAGQ_ITEM_JSON")
    if item is not None and "item" not in args and _takes(fn, "item"):
        args["item"] = json.loads(item)  # an instance of a mapped task: its item
    problem = bind_problem(fn, args)
    if problem is not None:
        shown = sorted(a for a in args if a != INPUTS_PARAMETER)
        return _fail(error_file, f"cannot call {call} with arguments {shown}: {problem}",
                     EXIT_CANNOT_CALL)
    try:
        result = fn(**args)
        if inspect.isawaitable(result):
            import asyncio  # only for coroutine functions: it is slow to import

            result = asyncio.run(_wait(result))
    except Exception as exc:
        tb = exc.__traceback__
        traceback.print_exception(type(exc), exc, tb.tb_next if tb else None)  # skip main()
        return _fail(error_file, _short(f"{type(exc).__name__}: {exc}"), EXIT_EXCEPTION)
    if result is None:
        return 0
    try:
        data = json.dumps(result, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return _fail(error_file, _short(
            f"the return value of {call} is not JSON-serialisable ({exc}); return plain data "
            "(dict, list, str, number, bool or None)"), EXIT_BAD_OUTPUT)
    Path(os.environ["DAGQ_OUTPUT_FILE"]).write_text(data)
    return 0


def _takes(fn: Any, name: str) -> bool:
    """True if ``fn`` has a parameter called ``name``."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


async def _wait(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _inputs() -> dict[str, Any]:
    path = os.environ.get("DAGQ_INPUTS_FILE")
    if not path or not Path(path).exists():
        return {}
    data: dict[str, Any] = json.loads(Path(path).read_text())
    return data


def _print_import_traceback(exc: Exception, call: str) -> None:
    """The traceback of what went wrong inside the user's module (none when the module
    or attribute simply does not exist: the one-line reason says it all)."""
    cause = exc.__cause__ if isinstance(exc, ImportError) else exc
    if cause is None:
        return
    module = call.partition(":")[0]
    missing = getattr(cause, "name", None)
    if isinstance(cause, ModuleNotFoundError) and missing and \
            (module == missing or module.startswith(missing + ".")):
        return
    traceback.print_exception(type(cause), cause, cause.__traceback__)


def _reason(exc: BaseException) -> str:
    # resolve_call's ImportErrors already say what failed; others come from the module
    return _short(str(exc) if isinstance(exc, ImportError) else f"{type(exc).__name__}: {exc}")


def _short(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 3] + "..."


def _fail(error_file: Path, message: str, code: int) -> int:
    print(f"dagq: {message}", file=sys.stderr)
    error_file.write_text(message)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Module-level functions and a processor that tests run as tasks (workers import them)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from dagq.core.kinds import TaskKind
from dagq.task import get_upstream_output
from dagq.worker.processors import Outcome, Processor, TaskContext


def numbers(n: int) -> list[int]:
    """0..n-1."""
    return list(range(n))


def add(a: int, b: int = 0) -> int:
    """a + b."""
    return a + b


def scale(factor: int, inputs: dict[str, Any]) -> dict[str, list[int]]:
    """Every upstream list multiplied by ``factor``, by upstream name."""
    return {name: [v * factor for v in value] for name, value in sorted(inputs.items())}


def total(inputs: dict[str, Any]) -> int:
    """Sum of every number inside the upstream outputs (dicts of lists)."""
    return sum(sum(values) for out in inputs.values() for values in out.values())


def fetch(source: str) -> Any:
    """The output of upstream task ``source``, read with the task helpers."""
    return {"from": source, "value": get_upstream_output(source)}


def whoami() -> dict[str, str]:
    """The script-contract variables the function sees."""
    keys = ("DAGQ_WORKFLOW_ID", "DAGQ_TASK", "DAGQ_ATTEMPT", "GREETING")
    return {k: os.environ.get(k, "") for k in keys} | {"cwd": os.getcwd()}


def nothing() -> None:
    """Returns nothing: the task has no output."""


def boom(message: str) -> None:
    """Always raises."""
    raise ValueError(message)


def unserialisable() -> object:
    """Returns a set, which JSON cannot carry."""
    return {1, 2}


def sleeper(pid_file: str, seconds: float) -> None:
    """Writes its pid, then sleeps (for cancel and timeout tests)."""
    Path(pid_file).write_text(str(os.getpid()))
    time.sleep(seconds)


async def async_add(a: int, b: int) -> int:
    """a + b, computed by a coroutine."""
    await asyncio.sleep(0)
    return a + b


class Shouter:
    """A class with a static method and a class method (importable as Class.method)."""

    @staticmethod
    def shout(text: str) -> str:
        """TEXT!"""
        return text.upper() + "!"

    @classmethod
    def name(cls) -> str:
        """The class name."""
        return cls.__name__


class ShoutProcessor(Processor):
    """Custom processor: runs tasks with ``kwargs.shout`` by publishing it upper-cased,
    followed by the sorted names of the upstream tasks."""

    task_kind = TaskKind("shout", "publish kwargs.shout upper-cased", marker="shout",
                         keys={"shout": {"type": "string", "description": "Text to shout."}})

    def handles(self, message: Any) -> bool:
        return "shout" in message.kwargs

    def run(self, ctx: TaskContext) -> Outcome:
        import json

        upstream = sorted(json.loads(ctx.inputs_file.read_text()))
        text = str(ctx.message.kwargs["shout"]).upper()
        ctx.output_file.write_text(json.dumps({"text": text, "upstream": upstream,
                                               "pid": os.getpid()}))
        return Outcome(True)

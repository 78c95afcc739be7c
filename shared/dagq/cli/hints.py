"""Why a wait cannot end: a queue no worker serves, or no coordinator.

``wait``, ``watch``, ``submit --wait`` and ``run`` print this hint when a workflow has
not ended after a few seconds.

The facts come from ``explain`` through the client (``WorkflowClient`` on a store or
``dagq.remote.Client`` over HTTP), the same reasons ``dagq explain`` prints and
``dagq doctor`` finds: a queued task whose queue no live worker serves, a workflow no
coordinator has started. Each hint is printed once, on stderr; the wait goes on.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import click

from dagq.cli.workflow_api import WorkflowAPI
from dagq.errors import DagqError

HINT_AFTER_S = 5.0
"""Seconds a workflow may wait before the hint is looked for [DAGQ_HINT_AFTER]."""
RECHECK_S = 15.0
"""Seconds between later looks (``explain`` reads the whole state)."""

_NO_WORKER = re.compile(r"queue (?P<queue>'[^']*'|\"[^\"]*\") has no live worker")
_NOT_STARTED = "has not been started by a coordinator"


def hint_after() -> float:
    """``DAGQ_HINT_AFTER`` seconds, else ``HINT_AFTER_S``."""
    try:
        return max(0.0, float(os.environ.get("DAGQ_HINT_AFTER", HINT_AFTER_S)))
    except ValueError:
        return HINT_AFTER_S


def hints_of(rows: list[dict[str, object]]) -> dict[str, str]:
    """One sentence per blocker in ``explain`` rows, keyed so each is told once."""
    queued: dict[str, list[str]] = {}
    out: dict[str, str] = {}
    for row in rows:
        reasons = row.get("reasons")
        for reason in reasons if isinstance(reasons, list) else []:
            text = str(reason)
            if (m := _NO_WORKER.search(text)) and row.get("phase") == "queued":
                queued.setdefault(m.group("queue").strip("'\""), []).append(str(row["task"]))
            elif _NOT_STARTED in text:
                out["coordinator"] = ("no coordinator has started this workflow: is one "
                                      "running? (start one: dagq coordinator)")
    for queue, tasks in sorted(queued.items()):
        shown = ", ".join(tasks[:5]) + (f" and {len(tasks) - 5} more" if len(tasks) > 5 else "")
        out[f"queue:{queue}"] = (f"no worker serves queue {queue!r}: {len(tasks)} task(s) "
                                 f"queued there ({shown}); start one: dagq worker {queue}")
    return out


@dataclass
class Hinter:
    """Looks for blockers of ``ids`` once they have waited ``after`` seconds, then every
    ``RECHECK_S``; says each new one through ``say`` (stderr by default)."""

    client: WorkflowAPI
    after: float = field(default_factory=hint_after)
    say: Callable[[str], None] = field(
        default=lambda text: click.echo(f"dagq: {text}", err=True))
    started: float = field(default_factory=time.monotonic)
    told: set[str] = field(default_factory=set)
    _next: float = 0.0

    def check(self, ids: list[str] | tuple[str, ...]) -> None:
        """Look for blockers of the workflows in ``ids`` if it is time to."""
        now = time.monotonic()
        if now - self.started < self.after or now < self._next:
            return
        self._next = now + RECHECK_S
        for wf in ids:
            try:
                rows = self.client.explain(wf)
            except DagqError:
                continue  # a hint is a courtesy: never let it end the wait
            for key, text in hints_of(rows).items():
                if (marker := f"{wf}\0{key}") not in self.told:
                    self.told.add(marker)
                    self.say(f"{wf}: {text}" if len(ids) > 1 else text)

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
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import click

from dagq.cli.workflow_api import WorkflowAPI
from dagq.errors import DagqError
from dagq.views.waiting import hints_of as hints_of  # re-exported: the hints live there

HINT_AFTER_S = 5.0
"""Seconds a workflow may wait before the hint is looked for [DAGQ_HINT_AFTER]."""
RECHECK_S = 15.0
"""Seconds between later looks (``explain`` reads the whole state)."""


def hint_after() -> float:
    """``DAGQ_HINT_AFTER`` seconds, else ``HINT_AFTER_S``."""
    try:
        return max(0.0, float(os.environ.get("DAGQ_HINT_AFTER", HINT_AFTER_S)))
    except ValueError:
        return HINT_AFTER_S


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

"""What the coordinator tells the metrics sink (``dagq.metrics``; docs/metrics.md).

Called only when a sink is configured (``if metrics.sink is not None``), so a
coordinator without metrics pays one comparison per batch and imports nothing more.
Attempt spans are built from the completions themselves: the worker's ``duration_s``
and the queue's enqueue time give each attempt's start and end.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from dagq.core import engine
from dagq.errors import DagqError
from dagq.metrics.recording import Applied, Sink, record_applied, record_effects
from dagq.ports import Backend
from dagq.protocol.messages import CompletionMessage, CompletionQueueMessage
from dagq.protocol.names import COMPLETIONS

log = logging.getLogger("dagq.metrics")

TERMINAL = frozenset({"completed", "failed", "cancelled"})
SAMPLE_LIMIT = 1000
"""Most pending/running index rows summed into ``dagq.tasks`` per sample."""


def applied(sink: Sink, backend: Backend, workflow_id: str,
            items: Sequence[CompletionQueueMessage], sent_at: Sequence[float],
            effects: Sequence[engine.Effects], now: float) -> None:
    """Record one applied group of messages and the engine effects it produced
    (completions the engine ignored as duplicates or stale are not counted)."""
    ignored = {(c.task, c.attempt) for fx in effects for c, _ in fx.ignored}
    done = [Applied(m.workflow_id, m.task, m.attempt, m.success, m.released, m.duration_s,
                    bool(m.cached), sent, m.worker or "", m.error or "")
            for m, sent in zip(items, sent_at, strict=False)
            if isinstance(m, CompletionMessage) and (m.task, m.attempt) not in ignored]
    record_applied(sink, done, now)
    for fx in effects:
        record_effects(sink, fx.transitions,
                       [d.queue for d in fx.dispatched if d.attempt > 1], fx.workflow_status)
        if fx.workflow_status is not None and fx.workflow_status[1] in TERMINAL:
            try:
                row = backend.index.get(workflow_id)
            except DagqError:
                continue
            sink.workflow(workflow_id, row.name, fx.workflow_status[1], row.created_at, now)


def sample(sink: Sink, backend: Backend) -> None:
    """The gauges: queue depths and tasks by status over pending and running workflows
    (one count per queue and one index query per status; at each sweep)."""
    try:
        depths: dict[tuple[tuple[str, str], ...], float] = {
            (("queue", name),): float(backend.queues.get(name).approximate_count())
            for name in [*backend.queues.names(), COMPLETIONS]}
        sink.gauge("dagq.queue.depth", depths)
        tasks: dict[str, float] = {}
        for status in ("pending", "running"):
            for row in backend.index.query(status=status, limit=SAMPLE_LIMIT):
                for task_status, n in row.counts.items():
                    tasks[task_status] = tasks.get(task_status, 0.0) + n
        by_status: dict[tuple[tuple[str, str], ...], float] = {
            (("status", s),): n for s, n in tasks.items()}
        sink.gauge("dagq.tasks", by_status)
    except DagqError as exc:  # never let metrics stop a sweep
        log.warning("metrics sample failed: %s", exc)

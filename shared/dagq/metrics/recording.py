"""What the coordinator reports: ``Sink`` (the interface), ``Recorder`` (turns applied
completions and engine effects into metric events) and ``Fanout``.

Metric names, units and attributes (docs/metrics.md):

| name | kind | unit | attributes |
|---|---|---|---|
| ``dagq.task.duration`` | histogram | s | ``outcome`` (success, failed, released), ``cached`` |
| ``dagq.task.transitions`` | counter | 1 | ``status`` (the new task status) |
| ``dagq.task.retries`` | counter | 1 | ``queue`` |
| ``dagq.cache.hits`` | counter | 1 | |
| ``dagq.completion.apply_latency`` | histogram | s | |
| ``dagq.workflow.finished`` | counter | 1 | ``status`` |
| ``dagq.queue.depth`` | gauge | 1 | ``queue`` |
| ``dagq.tasks`` | gauge | 1 | ``status`` (over pending and running workflows) |
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

HISTOGRAM_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                    60.0, 300.0, 900.0, 3600.0)
"""Bucket bounds (seconds) of both histograms."""

Attrs = Mapping[str, str]


@dataclass(frozen=True)
class Attempt:
    """One finished attempt, for its span."""

    workflow_id: str
    task: str
    attempt: int
    outcome: str
    start: float
    end: float
    worker: str = ""
    error: str = ""


class Sink(Protocol):
    """Where metric events go."""

    def add(self, name: str, value: float, attrs: Attrs) -> None:
        """Add ``value`` to counter ``name``."""
        ...

    def observe(self, name: str, value: float, attrs: Attrs) -> None:
        """Record ``value`` in histogram ``name``."""
        ...

    def gauge(self, name: str, values: Mapping[tuple[tuple[str, str], ...], float]) -> None:
        """Replace every value of gauge ``name`` (attribute tuples -> value)."""
        ...

    def attempt(self, a: Attempt) -> None:
        """One span for a finished attempt, in its workflow's trace."""
        ...

    def workflow(self, workflow_id: str, name: str, status: str, start: float,
                 end: float) -> None:
        """The root span of a finished workflow's trace."""
        ...


class Fanout:
    """Several sinks as one."""

    def __init__(self, sinks: Sequence[Sink]) -> None:
        self.sinks = list(sinks)

    def add(self, name: str, value: float, attrs: Attrs) -> None:
        for s in self.sinks:
            s.add(name, value, attrs)

    def observe(self, name: str, value: float, attrs: Attrs) -> None:
        for s in self.sinks:
            s.observe(name, value, attrs)

    def gauge(self, name: str, values: Mapping[tuple[tuple[str, str], ...], float]) -> None:
        for s in self.sinks:
            s.gauge(name, values)

    def attempt(self, a: Attempt) -> None:
        for s in self.sinks:
            s.attempt(a)

    def workflow(self, workflow_id: str, name: str, status: str, start: float,
                 end: float) -> None:
        for s in self.sinks:
            s.workflow(workflow_id, name, status, start, end)


def outcome_of(success: bool, released: bool) -> str:
    """``released``, ``success`` or ``failed``."""
    return "released" if released else "success" if success else "failed"


@dataclass(frozen=True)
class Applied:
    """What the recorder needs of one applied completion (built by the coordinator)."""

    workflow_id: str
    task: str
    attempt: int
    success: bool
    released: bool
    duration_s: float | None
    cached: bool
    sent_at: float
    """When the worker sent it (the queue's enqueue time; 0 if unknown)."""
    worker: str = ""
    error: str = ""


def record_applied(sink: Sink, items: Iterable[Applied], now: float) -> None:
    """Task durations, cache hits, apply latency and attempt spans of applied completions."""
    for it in items:
        outcome = outcome_of(it.success, it.released)
        if it.cached:
            sink.add("dagq.cache.hits", 1, {})
        if it.duration_s is not None:
            sink.observe("dagq.task.duration", it.duration_s,
                         {"outcome": outcome, "cached": "true" if it.cached else "false"})
        end = it.sent_at or now
        if it.sent_at:
            sink.observe("dagq.completion.apply_latency", max(now - it.sent_at, 0.0), {})
        sink.attempt(Attempt(it.workflow_id, it.task, it.attempt, outcome,
                             end - (it.duration_s or 0.0), end, it.worker, it.error))


def record_effects(sink: Sink, transitions: Iterable[tuple[str, str, str]],
                   retries: Iterable[str], workflow_status: tuple[str, str] | None) -> None:
    """Task transitions, retries (dispatches of attempt > 1, by queue) and finished
    workflows of one engine call."""
    counts: dict[str, int] = {}
    for _, _, new in transitions:
        counts[new] = counts.get(new, 0) + 1
    for status, n in counts.items():
        sink.add("dagq.task.transitions", n, {"status": status})
    for queue in retries:
        sink.add("dagq.task.retries", 1, {"queue": queue})
    if workflow_status is not None and workflow_status[1] in (
            "completed", "failed", "cancelled"):
        sink.add("dagq.workflow.finished", 1, {"status": workflow_status[1]})

"""``dagq doctor``'s findings: what stops work from moving, each with the way out.

``diagnose`` reads heartbeats, queue lengths, dead letters, the index and the states of
running workflows, and writes nothing: it works on private copies of the states (it
expires one to see which attempts are overdue). A store that refuses a question (Service
Bus without the Manage right) is noted in ``skipped`` and the rest is still looked at.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dagq.config import Settings
from dagq.core import engine
from dagq.core.engine import loads
from dagq.errors import DagqError, MissingRight
from dagq.ops.deadletters import stalled
from dagq.ports import Backend
from dagq.protocol.heartbeats import executing_keys, live_workers
from dagq.protocol.names import COMPLETIONS


@dataclass
class Report:
    """What ``diagnose`` found."""

    workers: dict[str, list[dict[str, object]]]
    """Live workers by queue, as their heartbeats say (``dagq.protocol.heartbeats``)."""
    problems: list[str] = field(default_factory=list)
    """One sentence per problem: what is wrong, where, and what to do."""
    skipped: list[str] = field(default_factory=list)
    """Checks the store refused to answer, and why."""


def diagnose(backend: Backend, settings: Settings, now: float, *,
             stale_pending: float = 120.0) -> Report:
    """Look for stuck workflows, queues without workers, overdue tasks and dead letters
    (``stale_pending``: seconds after which a pending workflow counts as stuck)."""
    workers = live_workers(backend.records, now, settings.heartbeat_interval)
    report = Report(workers)
    problem = report.problems.append
    for q, ws in sorted(workers.items()):
        for w in ws:
            if w.get("health"):
                problem(f"worker {w['id']} on {q!r} is unhealthy and takes no work: "
                        f"{w['health']}")
    try:  # Service Bus answers these only with the Manage right: say so and go on
        queue_names = backend.queues.names()
        for q in sorted(set(queue_names) - {COMPLETIONS}):
            waiting = backend.queues.get(q).approximate_count()
            if waiting and q not in workers:
                problem(f"queue {q!r}: {waiting} task(s) waiting and no live worker "
                        f"(start one: dagq worker {q})")
    except MissingRight as exc:
        queue_names = sorted({*workers, COMPLETIONS})
        report.skipped.append(f"queue lengths and the full queue list: {exc}")
    for row in backend.index.query(status="pending"):
        if now - row.created_at > stale_pending:
            problem(f"workflow {row.id} pending for {now - row.created_at:.0f}s: "
                    "is a coordinator running? (dagq coordinator)")
    for q in queue_names:
        for msg, reason in backend.queues.get(q).dead_letters(limit=20):
            problem(f"dead-lettered message {msg.id} on {q!r}: {reason}")
    for item in stalled(backend, queues=list(queue_names)):
        problem(f"workflow {item.workflow_id} is stalled: task {item.task} "
                f"attempt {item.attempt} waits for a message dead-lettered on "
                f"{item.queue!r}; fix: 'dagq deadletters fail' (fail the attempt; "
                "retries apply) or 'dagq deadletters redrive' (once the cause is gone)")
    _running_workflows(backend, report, now, settings)
    return report


def _running_workflows(backend: Backend, report: Report, now: float,
                       settings: Settings) -> None:
    """Lost task messages and overdue attempts of every running workflow."""
    executing = executing_keys(backend.records, now, settings.heartbeat_interval)
    empty: dict[str, bool] = {}
    for row in backend.index.query(status="running"):
        try:
            state = loads(backend.states.read(row.id)[0])
        except Exception:  # doctor reports, never crashes
            continue
        # a wait that no backlog and no worker explains: the message is gone
        for d in engine.waiting_dispatches(state, now, 2 * settings.visibility_timeout):
            if d.key in executing:
                continue
            if d.queue not in empty:
                try:
                    empty[d.queue] = backend.queues.get(d.queue).approximate_count() == 0
                except DagqError:
                    empty[d.queue] = False
            if empty[d.queue]:
                report.problems.append(
                    f"task {d.task} of {row.id} (attempt {d.attempt}) waits for a task "
                    f"message that queue {d.queue!r} no longer holds and no worker "
                    "runs it: the coordinator's sweep sends it again after "
                    "DAGQ_LOST_MESSAGE_AFTER")
        # a private copy: expiring it shows which attempts are overdue, nothing is written
        overdue = {t for t, old, _ in engine.expire(state, now).transitions if old == "running"}
        for task in sorted(overdue):
            report.problems.append(
                f"task {task} of {row.id} is past its timeout (is its worker alive? the "
                "coordinator fails it after DAGQ_TIMEOUT_GRACE)")

"""The worker's side of cancellation: the check before an attempt starts, and the poll
that reaches running attempts.

Before starting, the worker announces the attempt in its heartbeat and then asks
``Gate.check`` (one state read per workflow, cached briefly: ``Admission``); a refused
attempt is dropped, and a cancelled current one is reported ``cancelled`` so that its
workflow can end. While attempts run, ``Gate.poll`` reads the cancel hints once per
``DAGQ_CANCEL_POLL_INTERVAL`` for all of them (not once per attempt) and confirms each
hinted workflow against its state before stopping its attempts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable
from typing import Protocol

from dagq.errors import DagqError
from dagq.outage import TRANSIENT, Outage
from dagq.ports import Backend, Queue
from dagq.protocol.cancels import CANCELS
from dagq.protocol.messages import CompletionMessage, TaskMessage
from dagq.worker.admission import REASONS, Admission

log = logging.getLogger("dagq.worker")

RECENT_S = 10.0
"""A hint younger than this whose cancel is not in the state yet is polled again soon."""


class Stoppable(Protocol):
    """A running attempt as the poll sees it."""

    task: TaskMessage
    stop: threading.Event
    cancelled: bool


class Gate:
    """Admission checks and cancel polling for one worker."""

    def __init__(self, backend: Backend, completions: Queue, worker_id: str,
                 stats: Counter[str]) -> None:
        self.backend = backend
        self.completions = completions
        self.worker_id = worker_id
        self.stats = stats
        self.admission = Admission(backend.states)
        self._outage = Outage("cancel poll", log)

    def check(self, task: TaskMessage) -> str:
        """``"run"``, or why the delivered attempt must not start (a ``REASONS`` key)."""
        return self.admission.judge(task)

    def refuse(self, task: TaskMessage, verdict: str) -> None:
        """Log a dropped attempt; report a cancelled current one as ``cancelled``."""
        log.warning("dropping %s without running it: %s", task.key, REASONS[verdict])
        self.stats["dropped"] += 1
        if verdict == "cancelled":
            completion = CompletionMessage(task.workflow_id, task.task, task.attempt,
                                           success=False, error="cancelled before it started",
                                           worker=self.worker_id)
            self.completions.send(completion.encode(), message_id=f"{task.key}/done",
                                  session_id=task.workflow_id)

    def poll(self, running: Iterable[Stoppable]) -> bool:
        """One read of the cancel hints; stop the attempts of confirmed cancels. True if
        a hint was not confirmed yet (its cancel may be being written: poll again soon)."""
        try:
            hinted = dict(self.backend.records.list(CANCELS))
        except TRANSIENT as exc:  # one line when it starts, then one a minute
            self._outage.failed(exc)
            return False
        except DagqError as exc:
            log.warning("could not read cancel requests: %s", exc)
            return False
        self._outage.ok()
        now = time.time()
        self.stats["cancel_polls"] += 1
        unconfirmed = False
        for r in running:
            if r.cancelled or r.task.workflow_id not in hinted:
                continue
            try:
                verdict = self.admission.judge(r.task, fresh=True)
            except DagqError:
                continue
            if verdict != "run":
                log.info("stopping %s: %s", r.task.key, REASONS[verdict])
                stop(r)
            elif now - float(hinted[r.task.workflow_id].get("at") or 0) < RECENT_S:
                unconfirmed = True
        return unconfirmed


def stop(r: Stoppable) -> None:
    """Stop a running attempt as cancelled."""
    r.cancelled = True
    r.stop.set()

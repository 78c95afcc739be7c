"""Writing worker heartbeats, pruning old ones and the local health check.

The record format and its read side (``live_workers``, ``executing_keys``) are in
``dagq.protocol.heartbeats``.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable

from dagq.errors import DagqError
from dagq.outage import TRANSIENT, Outage
from dagq.ports import Records
from dagq.protocol.heartbeats import INTERVAL, PARTITION, live_workers

KEEP_S = 24 * 3600.0
"""Records of workers silent for longer than this are removed (by the next worker to start)."""

log = logging.getLogger("dagq.worker")


class Heartbeat:
    """Writes ``{queue, host, pid, running, last_seen}`` for one worker."""

    def __init__(self, records: Records, worker_id: str, queue: str,
                 interval: float = INTERVAL) -> None:
        self.records = records
        self.worker_id = worker_id
        self.queue = queue
        self.interval = interval
        self.started_at = time.time()
        self._outage = Outage(f"heartbeat of {worker_id}", log)
        self.health: Callable[[], str | None] = lambda: None
        """Why this worker is unhealthy (e.g. a GPU problem), or None."""

    def beat(self, running: list[str], *, stopped: bool = False,
             seen_at: float | None = None) -> bool:
        """Record that this worker is alive (``seen_at``: when ``running`` was read, now
        if not given); False (and a warning) if the store refused."""
        host, pid = self.worker_id.split(":")[:2]
        try:
            self.records.put(PARTITION, self.worker_id, {
                "queue": self.queue, "host": host, "pid": int(pid), "running": running,
                "last_seen": time.time() if seen_at is None else seen_at,
                "started_at": self.started_at, "stopped": stopped,
                "interval": self.interval, "health": self.health(),
            })
        except TRANSIENT as exc:  # one line when it starts, then one a minute
            self._outage.failed(exc)
            return False
        except DagqError as exc:  # the next beat retries; a missed one is not fatal
            log.warning("could not write the heartbeat of %s: %s", self.worker_id, exc)
            return False
        self._outage.ok()
        return True

    def stop(self) -> None:
        """Mark the worker stopped."""
        self.beat([], stopped=True)


def prune(records: Records, now: float, keep_s: float = KEEP_S) -> int:
    """Remove the records of workers not seen for ``keep_s`` seconds; how many went."""
    gone = 0
    try:
        for key, rec in records.list(PARTITION):
            if now - float(rec.get("last_seen", 0)) > keep_s:
                records.delete(PARTITION, key)
                gone += 1
    except DagqError as exc:
        log.warning("could not prune old worker heartbeats: %s", exc)
    return gone


def check_local(records: Records, queue: str, now: float, interval: float = INTERVAL) -> bool:
    """True if a worker on this host serving ``queue`` has a fresh, healthy heartbeat."""
    host = socket.gethostname()
    return any(w.get("host") == host and not w.get("health")
               for w in live_workers(records, now, interval).get(queue, []))

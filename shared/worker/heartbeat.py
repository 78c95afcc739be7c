"""Worker heartbeats in the store's records (partition ``workers``) and the health check."""

from __future__ import annotations

import contextlib
import socket
import time

from shared.errors import DagqError
from shared.ports import Records

PARTITION = "workers"
INTERVAL = 10.0


class Heartbeat:
    """Writes ``{queue, host, pid, running, last_seen}`` for one worker."""

    def __init__(self, records: Records, worker_id: str, queue: str,
                 interval: float = INTERVAL) -> None:
        self.records = records
        self.worker_id = worker_id
        self.queue = queue
        self.interval = interval
        self.started_at = time.time()

    def beat(self, running: list[str], *, stopped: bool = False) -> None:
        """Record that this worker is alive (failures are logged by the caller's retry)."""
        host, pid = self.worker_id.split(":")[:2]
        with contextlib.suppress(DagqError):
            self.records.put(PARTITION, self.worker_id, {
                "queue": self.queue, "host": host, "pid": int(pid), "running": running,
                "last_seen": time.time(), "started_at": self.started_at, "stopped": stopped,
            })

    def stop(self) -> None:
        """Mark the worker stopped."""
        self.beat([], stopped=True)


def live_workers(records: Records, now: float, max_age: float = 3 * INTERVAL
                 ) -> dict[str, list[dict[str, object]]]:
    """Workers seen within ``max_age`` seconds and not stopped, by queue."""
    out: dict[str, list[dict[str, object]]] = {}
    for key, rec in records.list(PARTITION):
        last = float(rec.get("last_seen", 0))
        if rec.get("stopped") or now - last > max_age:
            continue
        out.setdefault(str(rec.get("queue")), []).append({"id": key, **rec})
    return out


def check_local(records: Records, queue: str, now: float, max_age: float = 3 * INTERVAL) -> bool:
    """True if a worker on this host serving ``queue`` has a fresh heartbeat."""
    host = socket.gethostname()
    return any(w.get("host") == host for w in live_workers(records, now, max_age).get(queue, []))

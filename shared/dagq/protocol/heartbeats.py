"""Worker heartbeat records (partition ``workers``): their format and their read side.

A worker writes ``{queue, host, pid, running, last_seen, started_at, stopped, interval,
health}`` under its id (``host:pid:queue``) every ``DAGQ_HEARTBEAT_INTERVAL`` seconds and
once more, marked stopped, when it exits (``dagq.worker.heartbeat``). A worker is *live*
while its last heartbeat is younger than ``LIVE_INTERVALS`` intervals and it has not
stopped. Clients, the coordinator and ``dagq doctor`` read them through this module.
"""

from __future__ import annotations

from dagq.ports import Records

PARTITION = "workers"
INTERVAL = 10.0
"""Seconds between heartbeats unless the worker recorded its own interval."""
LIVE_INTERVALS = 3
"""Heartbeats a worker may miss before it counts as gone."""


def live_workers(records: Records, now: float, interval: float = INTERVAL
                 ) -> dict[str, list[dict[str, object]]]:
    """Workers not stopped whose last heartbeat is under ``LIVE_INTERVALS`` intervals old
    (each worker's own interval when it recorded one, else ``interval``), by queue."""
    out: dict[str, list[dict[str, object]]] = {}
    for key, rec in records.list(PARTITION):
        last = float(rec.get("last_seen", 0))
        own = float(rec.get("interval") or interval)
        if rec.get("stopped") or now - last > LIVE_INTERVALS * own:
            continue
        out.setdefault(str(rec.get("queue")), []).append({"id": key, **rec})
    return out


def executing_keys(records: Records, now: float, interval: float = INTERVAL) -> set[str]:
    """Dispatch keys that live workers report running (a worker adds a key to its
    heartbeat before it decides to start that attempt)."""
    out: set[str] = set()
    for workers in live_workers(records, now, interval).values():
        for w in workers:
            running = w.get("running")
            if isinstance(running, list):
                out.update(str(key) for key in running)
    return out

"""Worker heartbeat records (partition ``workers``): their format and their read side.

A worker writes ``{queue, host, pid, running, last_seen, started_at, stopped, interval,
health}`` under its id (``host:pid:queue``) every ``DAGQ_HEARTBEAT_INTERVAL`` seconds and
once more, marked stopped, when it exits (``dagq.worker.heartbeat``). A worker is *live*
while its last heartbeat is younger than ``LIVE_INTERVALS`` intervals and it has not
stopped. Clients, the coordinator and ``dagq doctor`` read them through this module.

A worker announces an attempt by *claiming* it (``dagq.worker.claims``: a create-only
record under the dispatch key in partition ``claims``, ``{worker, started, at}``) before
it checks the workflow and starts it; its next heartbeat lists the key while it runs. So
an attempt is executing while a live claimant's heartbeat lists it, or its claim is
newer than the claimant's last heartbeat (``claim_holds``). A heartbeat takes its
``last_seen`` before it reads the worker's running list, so a heartbeat newer than a
claim lists that claim's key unless the attempt has ended.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dagq.ports import Records

PARTITION = "workers"
INTERVAL = 10.0
"""Seconds between heartbeats unless the worker recorded its own interval."""
LIVE_INTERVALS = 3
"""Heartbeats a worker may miss before it counts as gone."""
CLAIMS = "claims"
"""The partition of attempt claims, keyed by dispatch key (``WORKFLOW/TASK/ATTEMPT``)."""


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


def claim_holds(key: str, claim: Mapping[str, Any], beat: Mapping[str, Any] | None,
                now: float, interval: float = INTERVAL, *, damaged: bool = False) -> bool:
    """Whether ``claim`` on ``key`` is still being run by its claimant, whose last
    heartbeat is ``beat``: the claimant is live (not stopped, heard from within
    ``LIVE_INTERVALS`` of its interval, the incarnation that claimed) and its heartbeat
    lists the key or predates the claim. ``damaged``: the answer for a record whose
    times are not numbers."""
    if not beat or beat.get("stopped") or beat.get("started_at") != claim.get("started"):
        return False
    try:
        last = float(beat.get("last_seen", 0.0))
        live = now - last <= LIVE_INTERVALS * float(beat.get("interval") or interval)
        at = float(claim.get("at", 0.0))
    except (TypeError, ValueError):
        return damaged
    return live and (key in (beat.get("running") or []) or last <= at)


def executing_keys(records: Records, now: float, interval: float = INTERVAL,
                   among: Iterable[str] = ()) -> set[str]:
    """Dispatch keys that live workers are running: those their heartbeats list, and of
    the keys ``among`` (the attempts the caller asks about) those whose claim holds
    (one claims listing per workflow of those keys, none when every key is listed)."""
    out: set[str] = set()
    beats: dict[str, dict[str, object]] = {}
    for workers in live_workers(records, now, interval).values():
        for w in workers:
            beats[str(w["id"])] = w
            running = w.get("running")
            if isinstance(running, list):
                out.update(str(key) for key in running)
    return out | held_claims(records, beats, now, interval, [k for k in among if k not in out])


def held_claims(records: Records, beats: Mapping[str, Mapping[str, Any]], now: float,
                interval: float, among: Iterable[str]) -> set[str]:
    """Of the dispatch keys ``among``, those whose claim holds, given the live workers'
    heartbeats ``beats`` by worker id (one claims listing per workflow of those keys)."""
    asked = set(among)
    out: set[str] = set()
    for workflow_id in sorted({key.split("/", 1)[0] for key in asked}):
        for key, claim in records.list(CLAIMS, prefix=f"{workflow_id}/"):
            if key in asked and claim_holds(key, claim, beats.get(str(claim.get("worker"))),
                                            now, interval):
                out.add(key)
    return out

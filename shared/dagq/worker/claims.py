"""Attempt claims: at most one live execution of each dispatched attempt.

Queues deliver at least once, and Storage queues do not de-duplicate: a coordinator killed
between its state write and its outbox clean-up re-sends dispatches that were already sent,
and a message whose lease ran out (a slow store, a dead worker) comes back. Before running
an attempt a worker *claims* it: a create-only record keyed by the dispatch id in the
store's records (partition ``claims``) naming the worker. That write is the whole cost of a
task that is delivered once. The claim's lease is the claimant's heartbeat, which it
writes anyway, so keeping a claim fresh costs nothing per task.

A worker that finds the record already there decides (reads only, on this rare path):

* claimed by a live worker that is still running it (its last heartbeat lists the key, or
  predates the claim) -> **hide** the message for a while and look again;
* claimed by a live worker whose heartbeat, written after the claim, no longer lists it ->
  the attempt finished there: **drop** the message (delete it without running);
* claimed by a worker that stopped, or whose heartbeat went stale and stays unchanged while
  the deciding worker waits one more liveness window with the message hidden (so a store
  outage, which silences every heartbeat at once, is not mistaken for a death) -> if the
  workflow's state still has the attempt running, **take over** the claim (an
  ETag-conditional write) and run it; otherwise drop.

A worker gives a claim back (deletes it) when it releases an attempt unfinished (SIGTERM,
preemption) or fails to handle a message; a give-back that the store refuses is retried
with every heartbeat and, until it succeeds, the key stays in the heartbeat's running list
so nobody reads the attempt as finished.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from dagq.core.engine.peek import peek
from dagq.errors import AlreadyExists, DagqError, NotFound, PreconditionFailed
from dagq.ports import Message, Queue, Records, StateStore
from dagq.protocol import heartbeats as heartbeat
from dagq.protocol.messages import TaskMessage

PARTITION = heartbeat.CLAIMS
NEW = "*new"
KEEP_S = 24 * 3600.0
"""Claims older than this are removed by the next worker to start."""
PRUNE_LIMIT = 1000
"""Most old claims one sweep removes."""
PRUNED_PARTITION = "claims-pruned"
PRUNED_KEY = "last"

log = logging.getLogger("dagq.worker")

Action = Literal["run", "hide", "drop"]


MAX_GRANTED = 100_000
"""Attempt keys a worker remembers having been granted (older ones: ask the state)."""


@dataclass(frozen=True)
class Verdict:
    """What to do with a delivered attempt."""

    action: Action
    reason: str
    hide_s: float = 0.0
    """For ``hide``: seconds to keep the message invisible before looking again."""


class Claims:
    """Claims attempts for ``worker_id`` (heart-beating every ``interval`` seconds)."""

    def __init__(self, records: Records, worker_id: str, incarnation: float, interval: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.records = records
        self.worker_id = worker_id
        self.incarnation = incarnation
        """The heartbeat's ``started_at``: tells a restarted worker with the same id (same
        host and pid, e.g. a restarted container) from the one that made a claim."""
        self.interval = interval
        self.clock = clock
        self._abandon: set[str] = set()
        self._lock = threading.Lock()
        # keys this incarnation was told to run; a claim of ours on any other key was
        # made by a create whose answer got lost (an SDK retry after a timeout, or an
        # error after the store applied it): that attempt never ran here
        self._granted: OrderedDict[str, None] = OrderedDict()

    # -- claiming ----------------------------------------------------------------------
    def claim(self, key: str, running_here: bool, still_open: Callable[[], bool],
              wait: Callable[[float], bool] | None = None) -> Verdict:
        """Try to claim attempt ``key``; ``running_here``: this worker already runs it;
        ``still_open()``: the stored workflow state still has the attempt running (asked
        only before a take-over); ``wait(s)``: keep the message hidden and wait ``s``
        seconds to confirm a silent claimant (False: do not wait, e.g. shutting down)."""
        try:
            return self._claim(key, running_here, still_open, wait, None)
        except DagqError as exc:  # the store is unreachable: let the message come back
            # a create that failed may still have been applied; until that claim is
            # gone this worker lists the key as running, so another worker that finds
            # it waits instead of reading it as finished here (and dropping it)
            if not running_here:
                self.give_back(key)
            return Verdict("hide", f"could not claim (store: {exc})", 0.0)

    def _claim(self, key: str, running_here: bool, still_open: Callable[[], bool],
               wait: Callable[[float], bool] | None, confirmed: float | None) -> Verdict:
        verdict = self._claim_once(key, running_here, still_open, wait, confirmed)
        if verdict.action == "run":
            with self._lock:
                self._granted[key] = None
                while len(self._granted) > MAX_GRANTED:
                    self._granted.popitem(last=False)
        return verdict

    def _claim_once(self, key: str, running_here: bool, still_open: Callable[[], bool],
                    wait: Callable[[float], bool] | None, confirmed: float | None) -> Verdict:
        now = self.clock()
        try:
            self.records.put(PARTITION, key, self._record(now), etag=NEW)
            return Verdict("run", "claimed")
        except AlreadyExists:
            pass
        try:
            rec, etag = self.records.get(PARTITION, key)
        except NotFound:  # given back in between: one more try
            try:
                self.records.put(PARTITION, key, self._record(now), etag=NEW)
                return Verdict("run", "claimed")
            except AlreadyExists:
                return Verdict("hide", "claimed by another worker just now", self.interval)
        claimant = str(rec.get("worker", ""))
        if claimant == self.worker_id and rec.get("started") == self.incarnation:
            with self._lock:
                abandoned = key in self._abandon
            if running_here:
                return Verdict("hide", "a copy of an attempt this worker is running",
                               self._window())
            with self._lock:
                granted = key in self._granted
            if not abandoned and not granted and still_open():
                return Verdict("run", "claimed (the store had applied an earlier try)")
            if not abandoned:
                return Verdict("drop", "this worker already finished the attempt")
            return self._take_over(key, etag, "this worker gave it back")
        return self._judge(key, rec, etag, claimant, now, still_open, wait, confirmed)

    def _judge(self, key: str, rec: dict[str, Any], etag: str, claimant: str, now: float,
               still_open: Callable[[], bool], wait: Callable[[float], bool] | None,
               confirmed: float | None) -> Verdict:
        try:
            beat, _ = self.records.get(heartbeat.PARTITION, claimant)
        except NotFound:
            beat = {}
        last = float(beat.get("last_seen", 0.0))
        own = float(beat.get("interval") or self.interval)
        window = heartbeat.LIVE_INTERVALS * own
        if beat.get("started_at") != rec.get("started"):  # that incarnation has exited
            beat = {**beat, "stopped": True}
        if beat and not beat.get("stopped") and now - last <= window:
            # a damaged record of a live claimant: hide and look again, never drop
            if heartbeat.claim_holds(key, rec, beat, now, self.interval, damaged=True):
                return Verdict("hide", f"running on live worker {claimant}", self._window(own))
            return Verdict("drop", f"finished on worker {claimant}")
        if not beat.get("stopped") and confirmed != last:
            # silent, not stopped: it must stay silent for one more window seen from here
            if wait is None or not wait(window):
                return Verdict("hide", f"worker {claimant} is silent", window)
            return self._claim(key, False, still_open, None, last)
        if not still_open():
            return Verdict("drop", "the attempt is no longer running in the workflow")
        return self._take_over(key, etag, f"worker {claimant} is gone")

    def _take_over(self, key: str, etag: str, why: str) -> Verdict:
        try:
            self.records.put(PARTITION, key, self._record(self.clock()), etag=etag)
        except PreconditionFailed:
            return Verdict("hide", "another worker took the claim over first", self.interval)
        with self._lock:
            self._abandon.discard(key)
        return Verdict("run", f"took over the claim: {why}")

    def _record(self, now: float) -> dict[str, Any]:
        return {"worker": self.worker_id, "started": self.incarnation, "at": now}

    def _window(self, interval: float | None = None) -> float:
        return heartbeat.LIVE_INTERVALS * (interval or self.interval)

    # -- giving back -------------------------------------------------------------------
    def give_back(self, key: str) -> bool:
        """Delete this worker's claim on ``key`` so another worker may run it at once;
        False if the store refused (retried by ``retry``)."""
        with self._lock:
            self._abandon.add(key)
        return self._delete(key)

    def retry(self) -> None:
        """Retry give-backs the store refused earlier."""
        with self._lock:
            keys = sorted(self._abandon)
        for key in keys:
            self._delete(key)

    def pending(self) -> list[str]:
        """Keys given back but not yet deleted (still reported as running)."""
        with self._lock:
            return sorted(self._abandon)

    def _delete(self, key: str) -> bool:
        try:
            rec, _ = self.records.get(PARTITION, key)
            if (rec.get("worker"), rec.get("started")) == (self.worker_id, self.incarnation):
                self.records.delete(PARTITION, key)
        except NotFound:
            pass
        except DagqError as exc:
            log.warning("could not give back the claim on %s (will retry): %s", key, exc)
            return False
        with self._lock:
            self._abandon.discard(key)
        return True


def admit(claims: Claims, queue: Queue, states: StateStore, msg: Message, task: TaskMessage,
          *, running_here: bool, stats: Counter[str], stopping: threading.Event,
          visibility_s: float) -> Message | None:
    """Claim ``task`` before running it: the message to run it from (its receipt may have
    changed), or None when the copy was dropped (the attempt finished elsewhere) or hidden
    for a later look (it runs on a live worker)."""
    current = [msg]

    def wait(seconds: float) -> bool:
        try:  # keep the message hidden while confirming, without another delivery
            current[0] = queue.extend(current[0], seconds + visibility_s)
        except DagqError:
            return False
        return not stopping.wait(seconds)

    verdict = claims.claim(task.key, running_here, lambda: attempt_open(
        states, task.workflow_id, task.task, task.attempt), wait)
    if verdict.action == "run":
        if verdict.reason != "claimed":
            log.info("running %s: %s", task.key, verdict.reason)
        return current[0]
    log.info("not running %s (%s): %s", task.key, verdict.action, verdict.reason)
    try:
        if verdict.action == "drop":
            queue.delete(current[0])
        elif verdict.hide_s > 0:
            # later looks come further apart, so a copy of a long task is seen few times
            backoff = 2 ** min(max(msg.delivery_count - 1, 0), 6)
            queue.extend(current[0], verdict.hide_s * backoff)
    except DagqError as exc:  # it comes back after its visibility timeout
        log.warning("could not %s the copy of %s: %s", verdict.action, task.key, exc)
    stats["duplicates_dropped" if verdict.action == "drop" else "duplicates_hidden"] += 1
    return None


def attempt_open(states: StateStore, workflow_id: str, task: str, attempt: int) -> bool:
    """True if the stored state of ``workflow_id`` has ``task`` running ``attempt``."""
    try:
        return peek(states.read(workflow_id)[0]).running(task) == attempt
    except NotFound:
        return False


def prune(records: Records, now: float, keep_s: float = KEEP_S,
          limit: int = PRUNE_LIMIT) -> int:
    """Remove up to ``limit`` claims older than ``keep_s`` seconds; how many went.

    The scan reads the whole partition, so one worker a day does it: the first to start
    after the last sweep is a day old wins a conditional write of ``PRUNED_KEY``."""
    gone = 0
    try:
        try:
            last, etag = records.get(PRUNED_PARTITION, PRUNED_KEY)
            if now - float(last.get("at", 0.0)) < keep_s:
                return 0
            records.put(PRUNED_PARTITION, PRUNED_KEY, {"at": now}, etag=etag)
        except NotFound:
            records.put(PRUNED_PARTITION, PRUNED_KEY, {"at": now}, etag=NEW)
        for key, rec in records.list(PARTITION):
            if gone >= limit:
                break
            if now - float(rec.get("at", 0.0)) > keep_s:
                records.delete(PARTITION, key)
                gone += 1
    except (AlreadyExists, PreconditionFailed):
        return 0  # another worker sweeps now
    except DagqError as exc:
        log.warning("could not prune old attempt claims: %s", exc)
    return gone

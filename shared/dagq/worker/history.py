"""Writes attempt records in the background, batched per workflow.

Attempt records (``dagq.protocol.attempts``) are not on a task's critical path: a slot hands its
record here and goes on to send the completion and take the next message. A thread
collects what arrives during ``WINDOW_S`` and writes each workflow's records with one
``Records.put_many`` (one request per 100 records on Azure Tables), so a busy worker adds
a fraction of a request per task instead of one. A record written again before it was
flushed replaces the older one. Store errors are retried on the next round, logged once
when they start, once a minute while they last and once when writes succeed again;
``stop()`` writes what is left.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from typing import Any

from dagq.outage import Outage
from dagq.ports import Records
from dagq.protocol.attempts import partition, record_key

log = logging.getLogger("dagq.worker")

WINDOW_S = 0.5
"""How long records gather before they are written."""
MAX_PENDING = 10_000
"""Records kept for retry during a store outage; older ones are dropped beyond this."""


class HistoryWriter:
    """Background, batched writer of attempt records."""

    def __init__(self, records: Records, window_s: float = WINDOW_S) -> None:
        self.records = records
        self.window_s = window_s
        self.writes = 0
        self.errors = 0
        self._pending: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._outage = Outage("attempt history", log)

    def start(self) -> HistoryWriter:
        """Start the writer thread; returns ``self``."""
        self._thread = threading.Thread(target=self._loop, name="dagq-history", daemon=True)
        self._thread.start()
        return self

    def submit(self, workflow_id: str, record: dict[str, Any]) -> None:
        """Queue ``record`` (needs ``task``, ``attempt`` and ``run_id``) for writing."""
        key = record_key(record["task"], record["attempt"], record["run_id"])
        with self._lock:
            self._pending[(workflow_id, key)] = dict(record)
            while len(self._pending) > MAX_PENDING:
                self._pending.pop(next(iter(self._pending)))
        self._wake.set()
        if self._thread is None:  # not started (library use): write at once
            self.flush()

    def stop(self) -> None:
        """Stop the thread after writing everything pending."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        self.flush()

    def flush(self) -> None:
        """Write everything pending now (failed writes stay pending)."""
        with self._lock:
            batch, self._pending = self._pending, {}
        by_workflow: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
        for (wf, key), rec in batch.items():
            by_workflow[wf].append((key, rec))
        for wf, items in by_workflow.items():
            try:
                self.records.put_many(partition(wf), items)
                self.writes += 1
                self._outage.ok()
            except Exception as exc:  # history must never cost a task or the worker
                self.errors += 1
                self._outage.failed(exc)  # logs the first failure, then once a minute
                with self._lock:
                    for key, rec in items:  # unless a newer version arrived meanwhile
                        self._pending.setdefault((wf, key), rec)

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._stopping.wait(self.window_s):
                return
            self.flush()
            with self._lock:
                if self._pending:  # a failed write: try again next round
                    self._wake.set()

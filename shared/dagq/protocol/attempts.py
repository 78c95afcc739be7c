"""Attempt history: one record per run of a task attempt, kept outside the state blob.

Workers write a record when an attempt ends (and one when it has been running for a
while), in batches (``dagq.worker.history``), in the records
store (partition ``attempts~{workflow_id}``, key ``{task}/{attempt:06d}.{run_id}``, where
``run_id`` is the run's start in epoch milliseconds: a released attempt runs again with
the same number, and each run keeps its own record).
Keeping them out of the workflow's state keeps the state small and its writes cheap
however often tasks are retried; one partition query lists a workflow's whole history.

A record (JSON)::

    {"task", "attempt", "run_id", "worker", "started_at", "ended_at", "duration_s",
     "result": running|succeeded|failed|cancelled|timed_out|released|stopped|cached,
     "exit_code", "signal", "error", "error_tail", "released",
     "log": {"printed": bytes, "stored": bytes, "truncated": bool}}

A result taken from the cache is recorded by the coordinator with result ``cached``,
worker ``cache`` and ``cached_from`` (``run/task/attempt`` of its source).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from dagq.core.error_summary import error_summary
from dagq.errors import DagqError
from dagq.ports import Records

ERROR_TAIL = 2000
"""Characters of an error's end kept in ``error_tail``."""
RESULTS = ("running", "succeeded", "failed", "cancelled", "timed_out", "released", "stopped",
           "cached")
"""Values of a record's ``result``."""


def partition(workflow_id: str) -> str:
    """The records partition holding a workflow's attempts."""
    return f"attempts~{workflow_id}"


def record_key(task: str, attempt: int, run_id: int) -> str:
    """The key of one run of one attempt (ordered by task, attempt, run)."""
    return f"{task}/{attempt:06d}.{run_id:013d}"


def first_line(error: str | None) -> str | None:
    """The attempt's one error summary (``dagq.core.error_summary``)."""
    return error_summary(error)


def error_fields(error: str | None) -> dict[str, Any]:
    """``error`` (the attempt's error summary) and ``error_tail`` of a record."""
    if not error:
        return {"error": None, "error_tail": None}
    return {"error": first_line(error), "error_tail": error[-ERROR_TAIL:]}


def list_attempts(records: Records, workflow_id: str,
                  task: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every stored attempt record of a workflow (or of one task), grouped by task name
    and ordered by attempt and run, each with ``run`` (0 for an attempt's first run, 1
    for the next, ...). A store error yields no history, not a failure."""
    prefix = f"{task}/" if task is not None else ""
    try:
        rows = records.list(partition(workflow_id), prefix)
    except DagqError:
        return {}
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for _key, rec in rows:
        name = rec.get("task")
        if isinstance(name, str) and (task is None or name == task):
            out[name].append(rec)
    for recs in out.values():
        recs.sort(key=lambda r: (int(r.get("attempt", 0)), int(r.get("run_id", 0))))
        for i, rec in enumerate(recs):
            same = i > 0 and recs[i - 1]["attempt"] == rec["attempt"]
            rec["run"] = recs[i - 1]["run"] + 1 if same else 0
    return dict(out)

"""Stores for the status-page tests and benchmark: a 1,000-task run in a mix of statuses,
written in-process through the client and the engine (no coordinator needed)."""

from __future__ import annotations

import time

from dagq.backends import open_backend
from dagq.client import WorkflowClient
from dagq.core import engine
from dagq.core.engine import dumps, loads
from dagq.core.model import TaskDef, WorkflowDef
from dagq.ports import Backend


def wide_definition(width: int = 996) -> WorkflowDef:
    """prepare -> ``width`` shards -> reduce -> report, plus a lone audit task: 1,000 tasks
    at the default width."""
    run = {"cmd": "true"}
    shards = tuple(TaskDef(f"shard-{i:04d}", kwargs=run, depends_on=("prepare",),
                           num_retries=1) for i in range(width))
    return WorkflowDef("wide-1000", (
        TaskDef("prepare", kwargs=run), *shards,
        TaskDef("reduce", kwargs=run, depends_on=tuple(t.name for t in shards),
                dep_policy="any"),
        TaskDef("report", kwargs=run, depends_on=("reduce",)), TaskDef("audit", kwargs=run)))


def build_wide(store: str, workflow_id: str = "wide-1000") -> Backend:
    """Submit the wide workflow to ``store`` and move it to a mid-run mix: most shards
    completed, some failed, some running, the rest waiting; returns the backend."""
    backend = open_backend(store)
    client = WorkflowClient(backend)
    client.submit(wide_definition(), workflow_id=workflow_id)
    data, etag = backend.states.read(workflow_id)
    state = loads(data)
    now = time.time() - 120
    engine.start(state, now)
    engine.apply(state, [engine.Completion("prepare", 1, True, output={"rows": 10_000})], now + 5)
    names = [n for n in state.graph.names if n.startswith("shard-")]
    done = [engine.Completion(n, 1, True, output={"n": i}) for i, n in enumerate(names)
            if i % 10 < 7]
    failed = [engine.Completion(n, a, False, error=f"shard {n} ran out of memory")
              for n in names[7::50] for a in (1, 2)]
    engine.apply(state, done, now + 30)
    for c in failed:
        engine.apply(state, [c], now + 40 + c.attempt)
    backend.states.replace(workflow_id, dumps(state), etag)
    backend.index.update_progress(workflow_id, status=state.status, counts=state.counts(),
                                  updated_at=now + 45)
    return backend


LONG_NAME = "extract-customer-features-from-the-warehouse"
"""A task name longer than one line of a graph box."""


def build_steer(store: str, workflow_id: str = "steer") -> Backend:
    """A running workflow to steer from the page: ``LONG_NAME`` completed, ``lint``
    failed, ``train`` (after ``LONG_NAME``) queued on ``default`` (no worker serves it)
    and ``report`` after it pending; returns the backend."""
    backend = open_backend(store)
    run = {"cmd": "true"}
    WorkflowClient(backend).submit(WorkflowDef("steer", (
        TaskDef(LONG_NAME, kwargs=run), TaskDef("lint", kwargs=run),
        TaskDef("train", kwargs=run, depends_on=(LONG_NAME,)),
        TaskDef("report", kwargs=run, depends_on=("train",)))), workflow_id=workflow_id)
    data, etag = backend.states.read(workflow_id)
    state = loads(data)
    now = time.time() - 30
    engine.start(state, now)
    engine.apply(state, [engine.Completion(LONG_NAME, 1, True),
                         engine.Completion("lint", 1, False, error="lint: 3 problems")], now + 5)
    backend.states.replace(workflow_id, dumps(state), etag)
    backend.index.update_progress(workflow_id, status=state.status, counts=state.counts(),
                                  updated_at=now + 6)
    return backend

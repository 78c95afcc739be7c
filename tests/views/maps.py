"""Stores holding a mapped run mid-way, written in-process through the client and the
engine (no coordinator or worker): ``scan`` found ``width`` files, ``fit`` maps over them
(some instances completed, some failed, some still running), ``reduce`` waits for them."""

from __future__ import annotations

import time
from collections.abc import Iterable

from dagq.backends import open_backend
from dagq.client import WorkflowClient
from dagq.core import engine
from dagq.core.engine import dumps, loads
from dagq.core.model import TaskDef, WorkflowDef
from dagq.ports import Backend


def map_definition() -> WorkflowDef:
    """scan -> fit (a map over ``inputs.scan.files``) -> reduce, and a lone ``audit``."""
    run = {"cmd": "true"}
    return WorkflowDef("map-views", (
        TaskDef("scan", kwargs=run),
        TaskDef("fit", kwargs={"cmd": "echo {item}"}, depends_on=("scan",),
                map={"over": "inputs.scan.files"}),
        TaskDef("reduce", kwargs=run, depends_on=("fit",)),
        TaskDef("audit", kwargs=run)))


def build_map(store: str, workflow_id: str = "map-views", *, width: int = 12,
              failed: Iterable[int] = (3, 7), running: Iterable[int] = (5,)) -> Backend:
    """Submit ``map_definition`` to ``store``, complete ``scan`` with ``width`` files and
    end every instance of ``fit`` but those ``running``: those ``failed`` fail, the rest
    complete; returns the backend."""
    backend = open_backend(store)
    client = WorkflowClient(backend)
    client.submit(map_definition(), workflow_id=workflow_id)
    data, etag = backend.states.read(workflow_id)
    state = loads(data)
    now = time.time() - 60
    engine.start(state, now)
    files = [f"file-{k:03d}.csv" for k in range(width)]
    engine.apply(state, [engine.Completion("scan", 1, True, output={"files": files}),
                         engine.Completion("audit", 1, True)], now + 1)
    bad, busy = set(failed), set(running)
    done = [engine.Completion(f"fit[{k}]", 1, k not in bad, output={"loss": k / 100},
                              error=None if k not in bad else f"fit {k} diverged")
            for k in range(width) if k not in busy]
    engine.apply(state, done, now + 5)
    backend.states.replace(workflow_id, dumps(state), etag)
    backend.index.update_progress(workflow_id, status=state.status, counts=state.counts(),
                                  updated_at=now + 6)
    return backend

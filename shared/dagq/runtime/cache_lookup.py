"""The coordinator's side of the task cache: before a cached task is dispatched, look its
key up; a hit is reported as the attempt's completion instead of being run.

The key is computed from what the task message would carry (``dagq.core.caching``); a
miss sends the message with the key, and the worker that runs it stores its result
(``dagq.protocol.cache.save``). A hit costs one record read (plus one object read when
the output is large); the completion it sends names the run the result came from, and
an attempt record with result ``cached`` keeps it in the task's history. A large cached
output is copied into the run (one more write), and so are the files the task synced or
stashed (a read and a write each), so the run never depends on the cache entry staying.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dagq.core import engine, paths
from dagq.core.caching import cache_key, components, policy_of
from dagq.core.engine.state import WorkflowState
from dagq.core.model import OutputRef
from dagq.ports import Backend
from dagq.protocol import attempts, cache, names
from dagq.protocol.messages import CompletionMessage
from dagq.protocol.outputs import fetch_verified
from dagq.worker.dirsync import synced_prefixes


@dataclass(frozen=True)
class Hit:
    """A dispatch answered from the cache."""

    entry: cache.Entry
    """The entry used."""
    kwargs: Mapping[str, Any]
    """The attempt's ``kwargs`` as its task message would carry them."""


class CacheLookup:
    """Computes cache keys of dispatches and answers hits (one per coordinator)."""

    def __init__(self, backend: Backend, clock: Callable[[], float] = time.time) -> None:
        self.backend = backend
        self.clock = clock

    def check(self, state: WorkflowState, d: engine.Dispatch, kwargs: Mapping[str, Any],
              inputs: Mapping[str, Any], item: tuple[bool, Any]
              ) -> tuple[dict[str, Any] | None, Hit | None]:
        """``(cache field of the task message, hit)`` for dispatch ``d``; ``(None,
        None)`` for a task that does not use the cache."""
        defn = state.definition
        policy = policy_of(state.task_def(d.task).cache, defn.cache)
        if policy is None:
            return None, None
        parts = components(policy, kwargs, defn.params, inputs, d.queue, item)
        key = cache_key(parts)
        field = {"key": key, "components": parts, "workflow": defn.name,
                 "max_age_s": policy.max_age_s}
        if policy.refresh:  # run it again; its result replaces the entry
            return {**field, "refresh": True}, None
        entry = cache.lookup(self.backend, key, self.clock(), policy.max_age_s)
        return field, Hit(entry, kwargs) if entry is not None else None

    def answer(self, state: WorkflowState, d: engine.Dispatch, hit: Hit) -> None:
        """Report attempt ``d`` completed with the cached result, and record it in the
        task's history."""
        e, now = hit.entry, self.clock()
        source = e.source()
        ref = e.ref
        if ref is not None:  # the run gets its own copy: clearing the cache leaves it whole
            data = e.data if e.data is not None else fetch_verified(self.backend, ref)
            name = paths.output_name(state.workflow_id, d.task, d.attempt)
            ref = OutputRef(name, self.backend.outputs.put(name, data), len(data))
        cache.copy_synced(self.backend, e, synced_prefixes(hit.kwargs, state.workflow_id, d.task))
        self.backend.records.put(attempts.partition(state.workflow_id),
                                 attempts.record_key(d.task, d.attempt, round(now * 1000)), {
            "task": d.task, "attempt": d.attempt, "run_id": round(now * 1000),
            "worker": "cache", "started_at": now, "ended_at": now, "duration_s": 0.0,
            "result": "cached", "cached_from": source, "cache_key": e.key,
            "exit_code": None, "signal": None, "error": None, "released": False})
        body = CompletionMessage(state.workflow_id, d.task, d.attempt, success=True,
                                 output=e.output, output_ref=ref, worker="cache",
                                 duration_s=0.0, cached=source).encode()
        self.backend.queues.get(names.COMPLETIONS).send(
            body, message_id=names.done_id(d.key), session_id=names.session_id(state.workflow_id))

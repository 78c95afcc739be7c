"""The records of concurrency keys (``dagq.runtime.slots`` changes them): where they live,
what they hold, and which attempts of a workflow wait for a slot (``dagq explain``).

One record per key (partition ``concurrency``, row = a digest of the key text):
``{"key", "limit", "holders": {dispatch key: since}, "waiting": {dispatch key: since}}``.
"""

from __future__ import annotations

import hashlib
import weakref
from typing import Any

from dagq.core import engine
from dagq.core.concurrency import render_key, spec_of
from dagq.core.engine.state import WorkflowState
from dagq.core.model import WorkflowDef
from dagq.errors import NotFound
from dagq.ports import Records

PARTITION = "concurrency"
"""The records partition of the keys' slots."""
_keyed_cache: dict[int, tuple[weakref.ref[WorkflowDef], bool]] = {}


def keyed(defn: WorkflowDef) -> bool:
    """True if some task of ``defn`` has a concurrency key (O(1) after the first call for
    a definition object)."""
    if defn.concurrency is not None:
        return True
    hit = _keyed_cache.get(id(defn))
    if hit is not None and hit[0]() is defn:
        return hit[1]
    columns = getattr(defn.tasks, "columns", None)
    if columns is not None:
        found = "concurrency" in columns().fields
    else:
        found = any(t.concurrency is not None for t in defn.tasks)
    if len(_keyed_cache) > 1024:
        _keyed_cache.clear()
    _keyed_cache[id(defn)] = (weakref.ref(defn), found)
    return found


def key_of(state: WorkflowState, task: str) -> tuple[str, int] | None:
    """``(rendered key, limit)`` of ``task`` in ``state``, or None for a task without a
    key; ``ValueError`` when the key cannot be rendered (a parameter not given)."""
    defn = state.definition
    spec = spec_of(state.task_def(task).concurrency, defn.concurrency)
    if spec is None:
        return None
    return render_key(spec.key, defn.params, state.item_of(state.graph.index[task])), spec.limit


def running_keys(state: WorkflowState) -> dict[str, str]:
    """``{dispatch key: rendered key}`` of the running attempts that have a key."""
    out: dict[str, str] = {}
    g = state.graph
    for i in state.running_set:
        name = g.names[i]
        try:
            found = key_of(state, name)
        except ValueError:
            continue
        if found is not None:
            out[engine.attempt_key(state, name)] = found[0]
    return out


def record_key(key: str) -> str:
    """The record row of ``key``: a digest (any text can be a key)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def parse_holder(holder: str) -> tuple[str, str, int] | None:
    """``(workflow, task, attempt)`` of a dispatch key, or None."""
    workflow, _, rest = holder.partition("/")
    task, _, attempt = rest.rpartition("/")
    number = attempt.split(".", 1)[0]
    return (workflow, task, int(number)) if workflow and task and number.isdigit() else None


def read(records: Records, key: str) -> tuple[dict[str, Any], str]:
    """The record of ``key`` and its ETag (an empty one and ``"*new"`` when there is
    none)."""
    try:
        value, etag = records.get(PARTITION, record_key(key))
    except NotFound:
        return {"key": key, "holders": {}, "waiting": {}}, "*new"
    value.setdefault("holders", {})
    value.setdefault("waiting", {})
    return value, etag


def waiting(records: Records, state: WorkflowState) -> dict[str, tuple[str, int, list[str]]]:
    """The attempts of ``state`` that wait for a slot: ``{dispatch key: (key, limit,
    holders oldest first)}`` (what ``dagq explain`` says; one read per key)."""
    wanted: dict[str, list[str]] = {}
    if keyed(state.definition):
        for holder, key in running_keys(state).items():
            if holder in state.outbox:  # not sent yet: it may be waiting
                wanted.setdefault(key, []).append(holder)
    out: dict[str, tuple[str, int, list[str]]] = {}
    for key, candidates in wanted.items():
        value, _ = read(records, key)
        held = value["holders"]
        holders = sorted(held, key=lambda h: held[h])
        limit = int(value.get("limit", len(holders)))
        for holder in candidates:
            if holder not in held:
                out[holder] = (key, limit, holders)
    return out

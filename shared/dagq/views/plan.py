"""``dagq plan``: what a run of a definition would take from the cache, before it runs.

The plan walks the tasks in dependency order and computes each cache key the way the
coordinator will (``dagq.runtime.cache_lookup``): a task whose upstream outputs are all
known — because those tasks would be cache hits too, or were skipped — gets its key and
one lookup; a hit makes its cached output known to the tasks after it. A task after one
that runs cannot be keyed before that output exists: the plan says it runs, and names the
upstream task. For a miss it names the key components that changed against the newest
entry a task of the same name and workflow made (``dagq.protocol.cache``), or says the
task was never cached.

The run takes the same decisions as the plan as long as the cache is not changed in
between, with one exception the plan states: a task after a task that runs may still hit
if that task's output comes out the same as before.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from dagq.core.caching import cache_key, changed, components, policy_of
from dagq.core.condition import cached_condition
from dagq.core.model import OutputRef, TaskDef, WorkflowDef
from dagq.core.params import render_kwargs
from dagq.core.policy import required_successes
from dagq.errors import ConditionError
from dagq.ports import Backend
from dagq.protocol import cache
from dagq.protocol.outputs import fetch_verified

DECISIONS = ("hit", "miss", "runs", "skipped", "mapped")
"""``hit``: taken from the cache; ``miss``: keyed, not found, runs; ``runs``: not cached,
or after a task that runs; ``skipped``: its condition is false on cached outputs;
``mapped``: a mapped task, whose instances are decided when it expands."""


@dataclass(frozen=True)
class Step:
    """The plan for one task."""

    task: str
    """The task."""
    decision: str
    """One of ``DECISIONS``."""
    reason: str
    """Why, in words."""
    key: str | None = None
    """Its cache key, when it could be computed."""
    source: str | None = None
    """For a hit: ``run/task/attempt`` the result comes from."""
    changed: list[str] = field(default_factory=list)
    """For a miss: the key components that changed since the task's newest entry."""

    def to_json(self) -> dict[str, Any]:
        """The ``dagq plan --json`` row."""
        return {"task": self.task, "decision": self.decision, "reason": self.reason,
                "key": self.key, "source": self.source, "changed": self.changed}


def plan(backend: Backend, defn: WorkflowDef, now: float) -> list[Step]:
    """The plan of a run of ``defn`` (parameters applied, as it would be submitted)."""
    before = cache.latest_components(backend, defn.name)
    known: dict[str, Any] = {}  # outputs (or None when skipped) of tasks that would not run
    steps: dict[str, Step] = {}
    for t in _ordered(defn):
        steps[t.name] = step = _one(backend, defn, t, known, before, now, steps)
        if step.decision == "skipped":
            known[t.name] = None
    return [steps[t.name] for t in defn.tasks]


def _one(backend: Backend, defn: WorkflowDef, t: TaskDef, known: dict[str, Any],
         before: dict[str, dict[str, Any]], now: float, steps: dict[str, Step]) -> Step:
    if t.map is not None:
        return Step(t.name, "mapped", "a mapped task: each instance is looked up when the "
                                      "map expands")
    waiting = [d for d in t.depends_on if d not in known]
    needed = required_successes(t.dep_policy, len(t.depends_on)) \
        if t.dep_policy != "all" else len(t.depends_on)
    if waiting and len(t.depends_on) - len(waiting) < needed:
        first = waiting[0]
        how = "is mapped" if steps[first].decision == "mapped" else "runs"
        return Step(t.name, "runs", f"after {first}, which {how}: its key needs that output")
    inputs = {d: known[d] for d in t.depends_on if d in known}
    if t.condition is not None:
        try:
            ok, note = cached_condition(t.condition).evaluate(
                inputs, lambda ref: _read(backend, ref))
        except ConditionError as exc:
            ok, note = False, str(exc)
        if not ok:
            return Step(t.name, "skipped", note or f"condition is false: {t.condition}")
    policy = policy_of(t.cache, defn.cache)
    if policy is None:
        return Step(t.name, "runs", "does not use the cache")
    kwargs = render_kwargs(t.kwargs, defn.params)
    parts = components(policy, kwargs, defn.params, inputs, defn.queue_of(t), (False, None))
    key = cache_key(parts)
    entry = cache.lookup(backend, key, now, policy.max_age_s)
    if entry is not None:
        known[t.name] = entry.ref if entry.ref is not None else entry.output
        return Step(t.name, "hit", f"cached: the result of {entry.source()}", key,
                    entry.source())
    earlier = before.get(t.name)
    if earlier is None:
        return Step(t.name, "miss", "never cached", key)
    diff = changed(parts, earlier) or ["max_age"]
    what = "older than max_age" if diff == ["max_age"] else "changed: " + ", ".join(diff)
    return Step(t.name, "miss", what, key, changed=diff)


def _read(backend: Backend, ref: OutputRef) -> Any:
    import json
    return json.loads(fetch_verified(backend, ref))


def _ordered(defn: WorkflowDef) -> list[TaskDef]:
    """The tasks in dependency order (definition order among the ready ones)."""
    tasks = list(defn.tasks)
    index = {t.name: i for i, t in enumerate(tasks)}
    waiting = [len(t.depends_on) for t in tasks]
    kids: list[list[int]] = [[] for _ in tasks]
    for i, t in enumerate(tasks):
        for d in t.depends_on:
            kids[index[d]].append(i)
    todo = deque(i for i, n in enumerate(waiting) if n == 0)
    out = []
    while todo:
        i = todo.popleft()
        out.append(tasks[i])
        for k in kids[i]:
            waiting[k] -= 1
            if waiting[k] == 0:
                todo.append(k)
    return out

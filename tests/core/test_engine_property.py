"""Property test: the engine agrees with a deliberately simple reference evaluator.

Random DAGs (up to 60 tasks, policies all/any/N, simple conditions, merge nodes, retries,
a parallelism cap) are driven by random sequences of completions: out of order, in
random batches, with duplicates, stale and never-dispatched attempts, released attempts,
state reloads and an optional cancel, followed by a workflow retry. After each run the
final task statuses (and attempt numbers) must equal those of ``reference``, which
recomputes everything from scratch until nothing changes. Along the way: no task is
dispatched before its policy and condition allow it, and no attempt is dispatched twice
(except the re-dispatch of a released attempt).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagq.core import engine
from dagq.core.engine import Completion, WorkflowState, dumps, loads
from dagq.core.engine.journal import encode_write, mark_stored
from dagq.core.engine.peek import Facts, peek
from dagq.core.model import DepPolicy, TaskDef, WorkflowDef

SEEDS = st.integers(0, 2**32 - 1)
"""The delivery schedule comes from a seeded generator: far fewer draws than drawing
every choice, so examples (and shrinking) stay fast; the DAG itself still shrinks."""
OK = ("completed", "skipped")
BAD = ("failed", "upstream_failed", "cancelled")


@dataclass
class Case:
    defn: WorkflowDef
    fails: dict[str, int]
    """A task's attempts numbered up to this fail; later ones succeed."""


def output_of(name: str) -> dict[str, int]:
    return {"v": int(name[1:]) % 3}


@st.composite
def cases(draw: st.DrawFn) -> Case:
    n = draw(st.integers(1, 60))
    tasks: list[TaskDef] = []
    fails: dict[str, int] = {}
    for i in range(n):
        name = f"t{i}"
        deps: list[str] = []
        if i:
            deps = sorted(set(draw(st.lists(st.integers(0, i - 1), max_size=4))))
        dep_names = tuple(f"t{j}" for j in deps)
        policy: DepPolicy = "all"
        condition = None
        merge = False
        if deps:
            policy = draw(st.sampled_from(["all", "any", "N"]))
            if policy == "N":
                policy = draw(st.integers(1, len(deps)))
            if policy == "all" and draw(st.integers(0, 3)) == 0:
                op = draw(st.sampled_from(["==", "!="]))
                condition = f"inputs.{draw(st.sampled_from(dep_names))}.v {op} " \
                            f"{draw(st.integers(0, 2))}"
            merge = condition is None and draw(st.integers(0, 9)) == 0
        tasks.append(TaskDef(name, depends_on=dep_names, dep_policy=policy, condition=condition,
                             merge=merge, num_retries=draw(st.integers(0, 2))))
        fails[name] = draw(st.integers(0, 4))
    cap = draw(st.one_of(st.none(), st.integers(1, 4)))
    return Case(WorkflowDef("prop", tuple(tasks), max_parallelism=cap), fails)


def canonical(s: WorkflowState) -> tuple[Any, ...]:
    """Everything a stored state must reproduce, in comparable form."""
    return (s.status, s.updated_at, s.cancel_requested, list(s.retry_ids), s.notices_sent,
            list(s.st), s.attempt, s.round_start, s.releases, s.output, s.output_ref,
            s.error, s.note, s.dispatched_at, s.delay_used, s.finished_at, list(s.stopping),
            list(s.held), list(s.outbox.items()), s.counts(), s.running(),
            sorted(s.deadlines), s.n_ok, s.n_bad, s.sinks_ok)


# -- the reference evaluator ---------------------------------------------------------------
def need_of(t: TaskDef) -> int:
    n = len(t.depends_on)
    return n if t.dep_policy == "all" else min(1, n) if t.dep_policy == "any" else int(
        t.dep_policy)


def condition_holds(t: TaskDef, status: dict[str, str | None], merges: set[str]) -> bool:
    assert t.condition is not None
    ref, op, value = t.condition.split()
    dep = ref.split(".")[1]
    got = output_of(dep)["v"] if status[dep] == "completed" and dep not in merges else None
    return (got == int(value)) == (op == "==")


def reference(case: Case, prior: dict[str, tuple[str, int]] | None = None
              ) -> dict[str, tuple[str, int]]:
    """Final (status, attempts) of every task, recomputed until nothing changes.

    ``prior`` holds the result of an earlier round: its completed and skipped tasks stay,
    every other task is decided again, its attempts numbered after the earlier ones.
    """
    tasks = case.defn.tasks
    merges = {t.name for t in tasks if t.merge}
    status: dict[str, str | None] = {t.name: None for t in tasks}
    attempts = {t.name: 0 for t in tasks}
    if prior:
        for name, (was, used) in prior.items():
            attempts[name] = used
            if was in OK:
                status[name] = was
    changed = True
    while changed:
        changed = False
        for t in tasks:
            if status[t.name] is not None:
                continue
            deps = [status[d] for d in t.depends_on]
            ok = sum(1 for d in deps if d in OK)
            bad = sum(1 for d in deps if d in BAD)
            need = need_of(t)
            if ok >= need:
                if t.condition is not None and not condition_holds(t, status, merges):
                    status[t.name] = "skipped"
                elif t.merge:
                    status[t.name] = "completed"
                    attempts[t.name] += 1
                else:
                    used, budget, fails = attempts[t.name], t.num_retries + 1, case.fails[t.name]
                    if used + budget > fails:
                        status[t.name] = "completed"
                        attempts[t.name] = max(used + 1, fails + 1)
                    else:
                        status[t.name] = "failed"
                        attempts[t.name] = used + budget
                changed = True
            elif bad > len(deps) - need:
                status[t.name] = "upstream_failed"
                changed = True
    assert None not in status.values(), status
    return {name: (s or "", attempts[name]) for name, s in status.items()}


# -- driving the engine ------------------------------------------------------------------
class Driver:
    def __init__(self, case: Case, seed: int) -> None:
        self.case = case
        self.rng = random.Random(seed)
        self.defs = {t.name: t for t in case.defn.tasks}
        self.merges = {t.name for t in case.defn.tasks if t.merge}
        self.state = engine.create(case.defn, "p", 0.0)
        self.stored = dumps(self.state)  # as the store holds it: a snapshot, then deltas
        self.facts: Facts | None = None
        self.now = 0.0
        self.inflight: list[tuple[str, int]] = []
        self.delivered: list[Completion] = []
        self.dispatched: set[tuple[str, int]] = set()
        self.keys: set[str] = set()
        self.released: set[tuple[str, int]] = set()
        self.releases = 0

    def call(self, fn: Any, *args: Any) -> engine.Effects:
        self.now += 1.0
        fx: engine.Effects = fn(self.state, *args)
        self.check(fx)
        self.store()
        return fx

    def store(self) -> None:
        """Write the state as the coordinator does (a delta, or a snapshot when the
        journal is full) and check that reading the stored bytes gives the same state."""
        engine.clear_outbox(self.state, [k for k in self.state.outbox if self.rng.random() < 0.5])
        kind, data = encode_write(self.state, max_entries=5, min_bytes=0)
        if kind == "append":
            self.stored += data
            mark_stored(self.state, None, len(data))
        else:
            self.stored = data
            mark_stored(self.state, len(data))
        s = self.state
        assert canonical(loads(self.stored)) == canonical(s)
        facts = peek(self.stored)  # what a worker reads before starting an attempt
        assert (facts.status, facts.attempt, facts.releases, facts.stopping) == (
            bytes(s.st), s.attempt, s.releases, {i for i, f in enumerate(s.stopping) if f})
        if self.facts is not None:  # a re-read replays only what was appended since
            again = peek(self.stored, self.facts)
            assert (again.status, again.attempt, again.releases, again.stopping) == (
                facts.status, facts.attempt, facts.releases, facts.stopping)
        self.facts = facts

    def check(self, fx: engine.Effects) -> None:
        s = self.state
        for d in fx.dispatched:
            assert d.key not in self.keys, f"dispatched twice: {d.key}"
            self.keys.add(d.key)
            pair = (d.task, d.attempt)
            if pair in self.dispatched:
                assert pair in self.released, f"attempt dispatched twice: {pair}"
                self.released.discard(pair)
            self.dispatched.add(pair)
            t = self.defs[d.task]
            dep_status = {n: s.task_view(n).status for n in t.depends_on}
            assert sum(1 for v in dep_status.values() if v in OK) >= need_of(t), (d, dep_status)
            if t.condition is not None:
                assert condition_holds(t, dict(dep_status), self.merges), (d, dep_status)
            self.inflight.append(pair)
        recount: dict[str, int] = {}
        for v in s.iter_task_views():
            recount[v.status] = recount.get(v.status, 0) + 1
        assert s.counts() == recount

    def completion(self, task: str, attempt: int, released: bool = False) -> Completion:
        success = attempt > self.case.fails[task]
        return Completion(task, attempt, success, output=output_of(task) if success else None,
                          error=None if success else f"fail {attempt}", released=released)

    def run(self, cancel_at: int | None = None) -> None:
        """Deliver everything in flight in a random order until nothing is in flight."""
        step = 0
        while self.inflight:
            step += 1
            if step == cancel_at:
                self.call(engine.cancel, self.now)
            rng = self.rng
            k = rng.randint(1, min(4, len(self.inflight)))
            batch: list[Completion] = []
            real: list[Completion] = []
            for _ in range(k):
                pair = self.inflight.pop(rng.randrange(len(self.inflight)))
                release = self.releases < 10 and rng.random() < 0.1
                c = self.completion(*pair, released=release)
                if release:
                    self.releases += 1
                    self.released.add(pair)
                batch.append(c)
                real.append(c)
            noise = [rng.randint(0, 2) for _ in range(rng.randint(0, 2))]
            busy = {c.task for c in real}
            for kind in noise:
                junk = self.noise(kind, busy)
                if junk is not None:
                    batch.insert(rng.randint(0, len(batch)), junk)
            fx = self.call(engine.apply, batch, self.now)
            ignored = [c for c, _ in fx.ignored]
            assert not any(c in ignored for c in real), fx.ignored
            assert all(c in ignored for c in batch if c not in real), (batch, fx.ignored)
            self.delivered.extend(real)
            if rng.random() < 0.125:
                self.state = loads(self.stored)  # a reload reads the snapshot and its deltas

    def noise(self, kind: int, busy: set[str]) -> Completion | None:
        """A completion the engine must ignore: a duplicate, a stale or a future attempt.

        Tasks in ``busy`` are left alone: a real completion in the same batch may make
        their next attempt current.
        """
        rng = self.rng
        if kind == 0 and self.delivered:
            c = rng.choice(self.delivered)
            if (c.task, c.attempt) in self.inflight or c.released or c.task in busy:
                return None
            return Completion(c.task, c.attempt, rng.random() < 0.5, error="dup")
        name = rng.choice(sorted(self.defs))
        attempt = self.state.task_view(name).attempt + (2 if kind == 1 else -1)
        if attempt < 1 or (name, attempt) in self.inflight or name in busy:
            return None
        return Completion(name, attempt, rng.random() < 0.5)

    def result(self) -> dict[str, tuple[str, int]]:
        return {v.name: (v.status, v.attempt) for v in self.state.iter_task_views()}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(), seed=SEEDS)
def test_engine_matches_reference(case: Case, seed: int) -> None:
    d = Driver(case, seed)
    d.call(engine.start, d.now)
    d.run()
    assert d.state.is_terminal()
    assert d.result() == reference(case)
    first = d.result()
    d.call(engine.retry, d.now, "r1")
    d.run()
    assert d.result() == reference(case, prior=first)
    if all(status in OK for status, _ in d.result().values()):
        assert d.state.status == "completed"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(), seed=SEEDS)
def test_cancel_then_retry_matches_reference(case: Case, seed: int) -> None:
    d = Driver(case, seed)
    d.call(engine.start, d.now)
    d.run(cancel_at=d.rng.randint(1, 8))
    s: WorkflowState = d.state
    assert s.is_terminal()
    assert s.status == "cancelled" or all(v.status in OK + BAD for v in s.iter_task_views())
    first = d.result()
    d.call(engine.retry, d.now, "r1")
    d.run()
    assert d.result() == reference(case, prior=first)
    assert d.state.is_terminal() and not d.state.cancel_requested

"""The coordinator answers cached tasks from the store (dagq.runtime.cache_lookup): a hit
sends no task message, records a ``cached`` attempt and completes the task with the
earlier output; a corrupt entry is a miss; hits survive a coordinator restart; the sweep's
lost-message path answers from the cache too; a task with ``cache: false`` is never
looked up. Coordinator and worker run in-process on one store, as in the other tests here.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dagq.client import WorkflowClient
from dagq.config import Settings
from dagq.core import paths
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES, TaskDef, WorkflowDef
from dagq.core.paths import dir_prefix
from dagq.ports import Backend
from dagq.protocol import attempts, cache
from dagq.protocol.messages import TaskMessage, decode_task
from dagq.protocol.outputs import fetch_verified
from dagq.protocol.synced import list_synced
from dagq.runtime.coordinator import Coordinator
from dagq.worker.runtime import Worker

AFTER = 600.0
SMALL = "printf '%s' '{\"n\": {params.n}, \"tag\": \"é\"}' > \"$DAGQ_OUTPUT_FILE\""
"""A small output (kept inside the cache entry)."""
LARGE = "(printf '['; seq -s, 1 {params.size}; printf ']') > \"$DAGQ_OUTPUT_FILE\""
"""A list of ``size`` numbers: 3,000 make ~14 KB (over ``INLINE_BYTES``, inline in the
completion), 12,000 make ~60 KB (stored as an output object by the worker too)."""
COPY = "printf '%s' '{\"done\": true}' > \"$DAGQ_OUTPUT_FILE\""
"""A task after ``prep``: its key holds ``prep``'s output digest."""


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Rig:
    """A client, a coordinator and a worker of queue ``default`` on one store; ``ran``
    lists the tasks whose message a worker received."""

    def __init__(self, backend: Backend, tmp_path: Path, clock: Clock | None = None) -> None:
        self.backend = backend
        self.tmp_path = tmp_path
        self.clock = clock
        kw: dict[str, Any] = {"clock": clock} if clock is not None else {}
        self.client = WorkflowClient(backend, **kw)
        self.coord = self._coordinator()
        self.worker = Worker(backend, Settings(), "default", log_dir=tmp_path / "logs")
        self.ran: list[str] = []
        self.messages: list[TaskMessage] = []

    def restart(self) -> None:
        """A new coordinator (and worker) over the same store."""
        self.coord = self._coordinator()
        self.worker = Worker(self.backend, Settings(), "default",
                             log_dir=self.tmp_path / "logs")

    def _coordinator(self) -> Coordinator:
        kw: dict[str, Any] = {"clock": self.clock} if self.clock is not None else {}
        return Coordinator(self.backend, Settings(lost_message_after=AFTER),
                           children=self.client, **kw)

    def submit(self, defn: WorkflowDef, **params: Any) -> str:
        return self.client.submit(defn, params=params or None).id

    def drive(self, *ids: str) -> None:
        queue = self.backend.queues.get("default")
        for _ in range(500):
            while self.coord.step():
                pass
            if all(self.client.row(i).status in TERMINAL_WORKFLOW_STATUSES for i in ids):
                return
            for msg in queue.receive(1, 60):
                self.messages.append(decode_task(msg.body))
                self.ran.append(self.messages[-1].task)
                self.worker._handle(msg)
        raise AssertionError("the workflows did not finish")

    def run(self, defn: WorkflowDef, **params: Any) -> str:
        wf = self.submit(defn, **params)
        self.drive(wf)
        assert self.client.row(wf).status == "completed", self.client.state(wf).counts()
        return wf

    def output(self, wf: str, task: str) -> Any:
        view = self.client.state(wf).task_view(task)
        if view.output_ref is not None:
            return json.loads(fetch_verified(self.backend, view.output_ref))
        return view.output


def chain(name: str = "ml", cmd: str = SMALL, cache_value: Any = True,
          **params: Any) -> WorkflowDef:
    return WorkflowDef(name, (
        TaskDef("prep", {"cmd": cmd}, cache=cache_value),
        TaskDef("train", {"cmd": COPY}, ("prep",), cache=cache_value),
    ), params={"n": 1, "size": 3000, **params})


@pytest.fixture
def rig(backend: Backend, tmp_path: Path) -> Iterator[Rig]:
    yield Rig(backend, tmp_path)


def _history(backend: Backend, wf: str) -> dict[str, list[dict[str, Any]]]:
    return attempts.list_attempts(backend.records, wf)


# -- hits ------------------------------------------------------------------------------


def test_a_second_run_is_answered_from_the_cache_without_any_task_message(rig: Rig) -> None:
    first = rig.run(chain())
    assert rig.ran == ["prep", "train"]
    assert len(cache.entries(rig.backend)) == 2
    rig.ran.clear()
    second = rig.submit(chain())
    queue = rig.backend.queues.get("default")
    while rig.coord.step():
        pass
    assert queue.approximate_count() == 0  # nothing was sent to a worker
    rig.drive(second)
    assert rig.ran == []
    state = rig.client.state(second)
    assert state.status == "completed"
    for task in ("prep", "train"):
        view = state.task_view(task)
        assert view.note == f"cached: the result of {first}/{task}/1"
        assert view.attempt == 1
        assert rig.output(second, task) == rig.output(first, task)
        (rec,) = _history(rig.backend, second)[task]
        assert rec["result"] == "cached" and rec["worker"] == "cache"
        assert rec["cached_from"] == f"{first}/{task}/1"
        assert rec["duration_s"] == 0.0 and rec["attempt"] == 1
    assert rig.output(second, "prep") == {"n": 1, "tag": "é"}
    assert len(cache.entries(rig.backend)) == 2  # a hit stores nothing


def test_a_changed_parameter_runs_what_it_changes_and_what_follows(rig: Rig) -> None:
    rig.run(chain())
    rig.ran.clear()
    rig.run(chain(), n=2)  # prep's command changes, so its output, so train's input
    assert rig.ran == ["prep", "train"]
    rig.ran.clear()
    rig.run(chain(), n=2)
    rig.run(chain(), n=1)
    assert rig.ran == []  # both earlier results are still there


def test_a_task_downstream_of_a_rerun_with_the_same_output_still_hits(rig: Rig) -> None:
    a = WorkflowDef("ml", (TaskDef("prep", {"cmd": SMALL}, cache={"version": "1"}),
                           TaskDef("train", {"cmd": COPY}, ("prep",), cache=True)),
                    params={"n": 1})
    rig.run(a)
    rig.ran.clear()
    b = WorkflowDef("ml", (TaskDef("prep", {"cmd": SMALL}, cache={"version": "2"}),
                           TaskDef("train", {"cmd": COPY}, ("prep",), cache=True)),
                    params={"n": 1})
    rig.run(b)
    assert rig.ran == ["prep"]  # its output came out the same: train's key is unchanged


@pytest.mark.parametrize("size", [3000, 12000], ids=["over-inline-bytes", "output-object"])
def test_a_large_output_is_served_from_its_cache_object(rig: Rig, size: int) -> None:
    first = rig.run(chain(cmd=LARGE), size=size)
    view = rig.client.state(first).task_view("prep")
    assert (view.output_ref is not None) == (size == 12000)
    (entry,) = [e for e in cache.entries(rig.backend) if e.task == "prep"]
    assert entry.ref is not None
    assert entry.ref.name == cache.object_name(entry.key, first, "prep", 1) == \
        f"cache/{entry.key}/{first}/prep.1.json"
    if view.output_ref is not None:  # the cache keeps a copy, not the run's own object
        assert view.output_ref.name == paths.output_name(first, "prep", 1) != entry.ref.name
    rig.ran.clear()
    second = rig.run(chain(cmd=LARGE), size=size)
    assert rig.ran == []
    hit = rig.client.state(second).task_view("prep")
    # the run's own copy of the entry's bytes
    assert hit.output is None and hit.output_ref is not None
    assert hit.output_ref.name == paths.output_name(second, "prep", 1)
    assert (hit.output_ref.md5, hit.output_ref.size) == (entry.ref.md5, entry.ref.size)
    assert rig.output(second, "prep") == list(range(1, size + 1))


@pytest.mark.parametrize("size", [3000, 12000], ids=["over-inline-bytes", "output-object"])
def test_a_run_answered_from_a_large_entry_keeps_its_output_when_the_entry_goes(
        rig: Rig, size: int) -> None:
    rig.run(chain(cmd=LARGE), size=size)
    second = rig.run(chain(cmd=LARGE), size=size)
    assert rig.ran == ["prep", "train"]  # the second run was answered from the cache
    (entry,) = [e for e in cache.entries(rig.backend) if e.task == "prep"]
    cache.delete(rig.backend, entry)
    assert entry.ref is not None
    assert entry.ref.name not in [n for n, *_ in rig.backend.outputs.list("cache/")]
    assert rig.output(second, "prep") == list(range(1, size + 1))


def test_an_output_with_unsorted_keys_hits(rig: Rig) -> None:
    # (Azure Table records come back with sorted keys: the entry keeps the output as text)
    # SMALL writes {"n": .., "tag": ..} (sorted); this one writes its keys unsorted
    cmd = "printf '%s' '{\"z\": 1, \"a\": {\"y\": 2, \"b\": 3}}' > \"$DAGQ_OUTPUT_FILE\""
    first = rig.run(chain(cmd=cmd))
    rig.ran.clear()
    second = rig.run(chain(cmd=cmd))
    assert rig.ran == []
    assert list(rig.output(second, "prep")) == ["z", "a"]
    assert rig.output(second, "prep") == rig.output(first, "prep")


# -- misses ----------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["malformed", "digest", "object"])
def test_a_corrupt_entry_is_a_miss_and_the_task_runs(rig: Rig, damage: str) -> None:
    cmd = LARGE if damage == "object" else SMALL
    rig.run(chain(cmd=cmd))
    (entry,) = [e for e in cache.entries(rig.backend) if e.task == "prep"]
    raw = rig.backend.records.get(cache.PARTITION, entry.key)[0]
    if damage == "malformed":
        rig.backend.records.put(cache.PARTITION, entry.key, {**raw, "attempt": "one"})
    elif damage == "digest":
        assert "output_json" in raw
        rig.backend.records.put(cache.PARTITION, entry.key,
                                {**raw, "output_json": '{"n":666}'})
    else:
        assert entry.ref is not None
        rig.backend.outputs.put(entry.ref.name, b"[1,2,3]")
    rig.ran.clear()
    wf = rig.run(chain(cmd=cmd))
    assert rig.ran == ["prep"]  # train's key is unchanged: its own entry still hits
    assert rig.client.state(wf).task_view("prep").note is None
    (rec,) = _history(rig.backend, wf).get("train", [{}])
    assert rec.get("result") == "cached"
    assert rig.output(wf, "prep") != {"n": 666}


@pytest.mark.parametrize("cmd", [SMALL, LARGE], ids=["inline", "large"])
def test_a_corrupt_entry_is_replaced_by_the_result_computed_instead(rig: Rig,
                                                                   cmd: str) -> None:
    first = rig.run(chain(cmd=cmd))
    (entry,) = [e for e in cache.entries(rig.backend) if e.task == "prep"]
    raw = rig.backend.records.get(cache.PARTITION, entry.key)[0]
    rig.backend.records.put(cache.PARTITION, entry.key, {**raw, "digest": "0" * 32})
    rig.ran.clear()
    second = rig.run(chain(cmd=cmd))  # a miss: prep runs, and stores its result
    assert rig.ran == ["prep"]
    rig.ran.clear()
    third = rig.run(chain(cmd=cmd))
    assert rig.ran == [], "the corrupt entry still holds the key"
    assert first != second
    assert rig.client.state(third).task_view("prep").note == \
        f"cached: the result of {second}/prep/1"


def test_max_age_makes_an_old_entry_a_miss(backend: Backend, tmp_path: Path) -> None:
    clock = Clock(time.time())  # the worker stamps entries with time.time
    rig = Rig(backend, tmp_path, clock)
    assert rig.coord.sender.cache.clock is clock  # the coordinator's clock, not its own
    defn = WorkflowDef("ml", (TaskDef("prep", {"cmd": SMALL}, cache={"max_age": "1h"}),),
                       params={"n": 1})
    rig.run(defn)
    (entry,) = cache.entries(rig.backend)
    made = entry.created_at - 7200  # the entry was made two hours ago
    raw = rig.backend.records.get(cache.PARTITION, entry.key)[0]
    rig.backend.records.put(cache.PARTITION, entry.key, {**raw, "created_at": made})
    clock.now = made + 1800  # by the coordinator's clock it is half an hour old: a hit
    rig.ran.clear()
    rig.run(defn)
    assert rig.ran == [], "the lookup did not use the coordinator's clock"
    clock.now = time.time()  # two hours old: a miss
    rig.run(defn)
    assert rig.ran == ["prep"]


def test_a_result_computed_after_expiry_is_used_by_the_next_run(rig: Rig) -> None:
    defn = WorkflowDef("ml", (TaskDef("prep", {"cmd": SMALL}, cache={"max_age": "1h"}),),
                       params={"n": 1})
    rig.run(defn)
    (entry,) = cache.entries(rig.backend)
    raw = rig.backend.records.get(cache.PARTITION, entry.key)[0]  # made two hours ago
    rig.backend.records.put(cache.PARTITION, entry.key,
                            {**raw, "created_at": entry.created_at - 7200})
    rig.ran.clear()
    second = rig.run(defn)  # expired: runs, and stores its result over the old entry
    assert rig.ran == ["prep"]
    rig.ran.clear()
    third = rig.run(defn)  # a moment later
    assert rig.ran == [], "the fresh result was not stored: the task runs on every run"
    assert rig.client.state(third).task_view("prep").note == \
        f"cached: the result of {second}/prep/1"


def test_a_task_with_cache_false_is_never_looked_up(rig: Rig,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    first = rig.run(chain())
    # what `--no-cache` submits: every task cache: false, over a cached workflow too
    base = chain()
    off = replace(base, cache=True, tasks=tuple(replace(t, cache=False) for t in base.tasks))
    looked: list[str] = []
    real = cache.lookup

    def spy(backend: Backend, key: str, now: float, max_age_s: float | None) -> Any:
        looked.append(key)
        return real(backend, key, now, max_age_s)

    monkeypatch.setattr(cache, "lookup", spy)
    rig.ran.clear()
    rig.messages.clear()
    wf = rig.run(off)
    assert rig.ran == ["prep", "train"] and looked == []
    assert [m.cache for m in rig.messages] == [None, None]  # no key travels to the worker
    assert len(cache.entries(rig.backend)) == 2  # and its results are not stored
    assert rig.client.state(wf).task_view("prep").note is None
    # the entries are still there for a run that uses the cache
    rig.ran.clear()
    again = rig.run(chain())
    assert rig.ran == [] and len(looked) == 2
    assert rig.client.state(again).task_view("prep").note == \
        f"cached: the result of {first}/prep/1"


# -- concurrency and restarts ------------------------------------------------------------


def test_two_runs_computing_the_same_key_at_once_both_complete(rig: Rig) -> None:
    a = rig.submit(chain(cmd=LARGE), size=3000)
    b = rig.submit(chain(name="other", cmd=LARGE), size=3000)  # same keys: names don't count
    queue = rig.backend.queues.get("default")
    while rig.coord.step():
        pass
    msgs = queue.receive(10, 60)
    assert sorted(decode_task(m.body).task for m in msgs) == ["prep", "prep"]
    keys = {decode_task(m.body).cache["key"] for m in msgs}  # type: ignore[index]
    assert len(keys) == 1
    # both workers run it before either has stored its result
    workers = [rig.worker, Worker(rig.backend, Settings(), "default",
                                  log_dir=rig.tmp_path / "logs2")]
    threads = [threading.Thread(target=w._handle, args=(m,))
               for w, m in zip(workers, msgs, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rig.drive(a, b)
    assert rig.client.row(a).status == rig.client.row(b).status == "completed"
    assert rig.output(a, "prep") == rig.output(b, "prep") == list(range(1, 3001))
    prep = [e for e in cache.entries(rig.backend) if e.task == "prep"]
    assert len(prep) == 1  # one entry won
    assert cache.lookup(rig.backend, prep[0].key, prep[0].created_at, None) is not None
    rig.ran.clear()
    rig.run(chain(cmd=LARGE), size=3000)
    assert rig.ran == []


STAMPED = ("(printf '[\"%s\",' \"$DAGQ_WORKFLOW_ID\"; seq -s, 1 3000; printf ']') "
           "> \"$DAGQ_OUTPUT_FILE\"")
"""A large output that differs from run to run (a run id, as a timestamp or a random seed
would make it): the same key, other bytes."""


def test_two_runs_with_different_large_outputs_for_one_key_leave_a_usable_entry(
        rig: Rig) -> None:
    a = rig.submit(chain(cmd=STAMPED))
    b = rig.submit(chain(name="other", cmd=STAMPED))
    queue = rig.backend.queues.get("default")
    while rig.coord.step():
        pass
    msgs = queue.receive(10, 60)
    other = Worker(rig.backend, Settings(), "default", log_dir=rig.tmp_path / "logs2")
    rig.worker._handle(msgs[0])  # the first stores its entry...
    other._handle(msgs[1])  # ...the second finds the key taken
    rig.drive(a, b)
    assert rig.output(a, "prep")[0] == a and rig.output(b, "prep")[0] == b  # both valid
    (entry,) = [e for e in cache.entries(rig.backend) if e.task == "prep"]
    assert cache.lookup(rig.backend, entry.key, entry.created_at, None) is not None, \
        "the winner's entry no longer verifies"
    assert entry.workflow_id == a and entry.ref is not None
    # the loser removed its own copy: only the winner's object is left
    assert [n for n, *_ in rig.backend.outputs.list(f"cache/{entry.key}/")] == \
        [entry.ref.name]
    rig.ran.clear()
    third = rig.run(chain(cmd=STAMPED))
    assert rig.ran == [] and rig.output(third, "prep")[0] == a


def test_two_tasks_of_one_run_with_one_key_leave_a_usable_entry(rig: Rig) -> None:
    # the same work under two task names (names are not part of the key): one key, one
    # run, attempt 1 both; the output is large
    defn = WorkflowDef("ml", (TaskDef("a", {"cmd": LARGE}, cache=True),
                              TaskDef("b", {"cmd": LARGE}, cache=True)), params={"size": 3000})
    rig.run(defn)
    assert sorted(rig.ran) == ["a", "b"]
    (entry,) = cache.entries(rig.backend)
    assert cache.lookup(rig.backend, entry.key, entry.created_at, None) is not None, (
        "the second task wrote the winner's object name (object_name has no task), lost, "
        "and deleted it")
    rig.ran.clear()
    rig.run(defn)
    assert rig.ran == []


def test_hits_survive_a_coordinator_restart(rig: Rig) -> None:
    first = rig.run(chain(cmd=LARGE))
    rig.restart()
    rig.ran.clear()
    second = rig.run(chain(cmd=LARGE))
    assert rig.ran == []
    assert rig.client.state(second).task_view("prep").note == \
        f"cached: the result of {first}/prep/1"


def test_a_restart_between_submit_and_dispatch_still_hits(rig: Rig) -> None:
    rig.run(chain())
    wf = rig.submit(chain())
    rig.restart()  # the submission's start is applied by the new coordinator
    rig.ran.clear()
    rig.drive(wf)
    assert rig.ran == [] and rig.client.row(wf).status == "completed"


def test_the_lost_message_resend_answers_from_an_entry_made_since(backend: Backend,
                                                                  tmp_path: Path) -> None:
    clock = Clock()
    rig = Rig(backend, tmp_path, clock)
    defn = WorkflowDef("ml", (TaskDef("prep", {"cmd": SMALL}, cache=True),), params={"n": 1})
    wf = rig.submit(defn)
    while rig.coord.step():
        pass
    rig.coord.sweep(clock.now)  # clears the sent outbox entry
    queue = backend.queues.get("default")
    (msg,) = queue.receive(1, 60)
    task = decode_task(msg.body)
    queue.delete(msg)  # the message is lost
    # meanwhile another run of the same definition computed the key
    other = Rig(backend, tmp_path / "other")
    done = other.run(defn)
    (entry,) = cache.entries(backend)
    assert task.cache is not None and entry.key == task.cache["key"]
    clock.now += AFTER + 1
    rig.coord.sweep(clock.now)
    assert queue.approximate_count() == 0  # answered, not re-sent
    assert rig.coord.stats.counts["lost_resent"] == 0
    while rig.coord.step():
        pass
    state = rig.client.state(wf)
    assert state.status == "completed"
    assert state.task_view("prep").note == f"cached: the result of {done}/prep/1"
    (rec,) = _history(backend, wf)["prep"]
    assert rec["result"] == "cached" and rec["cached_from"] == f"{done}/prep/1"


def test_the_sweep_answers_a_lost_message_from_the_cache_once(backend: Backend,
                                                              tmp_path: Path) -> None:
    clock = Clock()
    rig = Rig(backend, tmp_path, clock)
    defn = WorkflowDef("ml", (TaskDef("prep", {"cmd": SMALL}, cache=True),), params={"n": 1})
    wf = rig.submit(defn)
    while rig.coord.step():
        pass
    rig.coord.sweep(clock.now)
    queue = backend.queues.get("default")
    (msg,) = queue.receive(1, 60)
    queue.delete(msg)  # the message is lost
    Rig(backend, tmp_path / "other").run(defn)  # another run computes the key
    answers: list[str] = []
    real = rig.coord.sender.cache.answer

    def spy(state: Any, d: Any, hit: Any) -> None:
        answers.append(d.key)
        real(state, d, hit)

    rig.coord.sender.cache.answer = spy  # type: ignore[method-assign]
    clock.now += AFTER + 1
    rig.coord.sweep(clock.now)
    assert len(answers) == 1
    # the next sweeps come before the coordinator has applied the completion
    for _ in range(3):
        clock.now += AFTER / 4
        rig.coord.sweep(clock.now)
    assert len(answers) == 1, "the sweep answered the same lost message again"
    assert queue.approximate_count() == 0
    assert rig.coord.stats.counts["lost_resent"] == 0
    assert len(_history(backend, wf)["prep"]) == 1  # one cached attempt record
    while rig.coord.step():
        pass
    assert rig.client.row(wf).status == "completed"
    assert len(_history(backend, wf)["prep"]) == 1


# -- cost of a hit -----------------------------------------------------------------------


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


@pytest.mark.parametrize("size", [None, 3000], ids=["inline", "large"])
def test_the_requests_of_one_hit(rig: Rig, size: int | None, backend: Backend,
                                 monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    one = WorkflowDef("one", (TaskDef("prep", {"cmd": LARGE if size else SMALL},
                                      cache=True),), params={"n": 1, "size": size or 0})
    sends: list[dict[str, int]] = []
    real_send = rig.coord.sender.send

    def counted(*args: Any) -> Any:  # the outbox send of the dispatch: lookup and answer
        before = backend.stats.snapshot()
        try:
            return real_send(*args)
        finally:
            sends.append(_delta(before, backend.stats.snapshot()))

    monkeypatch.setattr(rig.coord.sender, "send", counted)
    rig.run(one)
    miss = sends[0]  # the first run's dispatch: a lookup that misses, then the message
    sends.clear()
    wf = rig.submit(one)
    before = backend.stats.snapshot()
    rig.drive(wf)
    whole = _delta(before, backend.stats.snapshot())
    assert rig.ran == ["prep"] and rig.client.state(wf).task_view("prep").note is not None
    (hit,) = [d for d in sends if d]
    (entry,) = cache.entries(backend)
    before = backend.stats.snapshot()
    assert cache.lookup(backend, entry.key, entry.created_at, None) is not None
    lookup = _delta(before, backend.stats.snapshot())
    with capsys.disabled():
        print(f"\n[{'large' if size else 'inline'}] lookup alone: {lookup}\n"
              f"  dispatch answered from the cache (lookup + attempt record + completion): "
              f"{hit} = {sum(hit.values())}\n"
              f"  dispatch that missed (lookup + task message): {miss} = "
              f"{sum(miss.values())}\n"
              f"  the whole hit run (start applied .. completion applied): {whole} = "
              f"{sum(whole.values())}")
    # the lookup: one record read, plus one object read (the whole object, to check its
    # MD5) for a large output; answering adds the attempt record and the completion, and
    # for a large output the run's own copy of the object (one write: the bytes the
    # lookup verified are not read again)
    assert sum(lookup.values()) == (2 if size else 1), lookup
    assert sum(hit.values()) == sum(lookup.values()) + 2 + (1 if size else 0), hit
    assert sorted(hit.values()) == [1] * len(hit), hit  # one request of each kind
    assert sum(miss.values()) == 2, miss  # the record read that misses + the task message


# -- synced files ----------------------------------------------------------------------

SYNC = ("mkdir -p out && printf 'w' > out/model.bin && printf 'l' > out/log.txt && "
        "printf '%s' '{\"ok\": true}' > \"$DAGQ_OUTPUT_FILE\"")


def _synced_run(rig: Rig, tmp_path: Path) -> WorkflowDef:
    return WorkflowDef("sync", (TaskDef("fit", {
        "cmd": SYNC, "cwd": str(tmp_path),
        "bg_dirsync_to": {"path": str(tmp_path / "out"), "dest": "ckpt"}}, cache=True),))


def test_a_hit_brings_the_files_its_task_synced(rig: Rig, tmp_path: Path) -> None:
    defn = _synced_run(rig, tmp_path)
    first = rig.run(defn)
    (entry,) = cache.entries(rig.backend)
    assert entry.synced is not None and entry.synced["files"] == 2
    rig.ran.clear()
    second = rig.run(defn)
    assert rig.ran == []  # answered from the cache
    got = {rel: md5 for rel, _size, md5 in list_synced(rig.backend.outputs, second, "ckpt")}
    assert got == {rel: md5 for rel, _size, md5 in
                   list_synced(rig.backend.outputs, first, "ckpt")}
    assert sorted(got) == ["log.txt", "model.bin"]


def test_an_entry_whose_synced_files_are_gone_is_a_miss(rig: Rig, tmp_path: Path) -> None:
    defn = _synced_run(rig, tmp_path)
    first = rig.run(defn)
    for name, _size, _md5 in rig.backend.outputs.list(dir_prefix(first, "ckpt")):
        rig.backend.outputs.delete(name)  # the source run's files (e.g. pruned)
    rig.ran.clear()
    rig.run(defn)
    assert rig.ran == ["fit"]  # ran again instead of a hit without its files

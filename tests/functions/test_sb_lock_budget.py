"""The Service Bus-triggered coordinator ends every invocation inside the queue's lock.

The extension's batch receive loop does not renew message locks, so an invocation that
outlasts the lock duration would lose its batch to another delivery. These tests slow
the apply down with an injected clock (each completion applied for the first time costs
a fixed number of seconds) and check that the invocation stops starting work once its
budget is spent, that the messages it did not reach come back through the host's
redelivery, and that every completion ends up applied exactly once.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from dagq.client import WorkflowClient
from dagq.core.parse import load_definition
from dagq.errors import ConfigError
from dagq.functions.coordinator_sb import (
    BUDGET_SHARE,
    DEFAULT_LOCK_S,
    LOCK_SETTING,
    LockBudget,
    LockBudgetSpent,
    lock_budget,
    servicebus_blueprint,
)
from dagq.functions.runtime import Runtime
from dagq.ports import Backend
from dagq.protocol.messages import CompletionMessage, decode_task
from dagq.protocol.names import COMPLETIONS
from dagq.runtime.report import Applied
from tests.functions.host import Handler, app_of, deliver_servicebus, user_functions

TASKS = 6
FAN = "name: fan\ntasks:\n" + "".join(
    f'  - {{name: t{i}, kwargs: {{cmd: "true"}}}}\n' for i in range(TASKS))
LOCK_S = 60.0
COST_S = 10.0
"""Injected cost of applying one completion the workflow has not seen yet."""


class FakeClock:
    """A monotonic clock that only moves when the slow apply below advances it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def sqlite_runtime(tmp_path: Path) -> Runtime:
    return Runtime({"DAGQ_STORE": f"sqlite:{tmp_path / 'dagq.db'}"})


def slow_apply(runtime: Runtime, clock: FakeClock, log: list[int]) -> set[bytes | str]:
    """Injected fault: the real ``apply_messages``, made to cost ``COST_S`` per new
    completion on ``clock`` (told apart by body); ``log`` gets the size of each call.
    Returns the bodies applied so far."""
    coord = runtime.coordinator()
    real = coord.apply_messages
    seen: set[bytes | str] = set()

    def apply(bodies: Iterable[tuple[str, bytes | str]]) -> Applied:
        pairs = list(bodies)
        log.append(len(pairs))
        clock.now += COST_S * len([b for _, b in pairs if b not in seen])
        seen.update(b for _, b in pairs)
        return real(pairs)

    coord.apply_messages = apply  # type: ignore[method-assign]
    return seen


def coordinator(runtime: Runtime, budget: LockBudget) -> Handler:
    return user_functions(app_of(servicebus_blueprint(runtime, budget)))[
        "coordinator_servicebus"]


def dispatch_all(backend: Backend, fn: Handler) -> str:
    """Submit FAN, apply its start message, and take every task message like a worker."""
    wf = WorkflowClient(backend).submit(load_definition(FAN), workflow_id="fan").id
    assert deliver_servicebus(fn, backend) == 1
    queue = backend.queues.get("default")
    messages = queue.receive(TASKS + 1, 30.0)
    assert sorted(decode_task(m.body).task for m in messages) == [f"t{i}" for i in range(TASKS)]
    queue.delete_many(messages)
    return wf


def complete(backend: Backend, wf: str, tasks: Iterable[str]) -> None:
    for task in tasks:
        body = CompletionMessage(wf, task, 1, success=True, output={"task": task},
                                 worker="test:1", duration_s=0.01).encode()
        backend.queues.get(COMPLETIONS).send(body, session_id=wf)


def statuses(backend: Backend, wf: str) -> dict[str, str]:
    return {str(row["name"]): str(row["status"]) for row in WorkflowClient(backend).tasks(wf)}


def test_a_slow_batch_stops_at_the_budget_and_the_rest_is_redelivered(
        sqlite_runtime: Runtime) -> None:
    clock = FakeClock()
    budget = LockBudget(LOCK_S, clock=clock, sleep=clock.sleep)
    fn = coordinator(sqlite_runtime, budget)
    backend = sqlite_runtime.backend()
    wf = dispatch_all(backend, fn)
    calls: list[int] = []
    slow_apply(sqlite_runtime, clock, calls)

    complete(backend, wf, ["t0"])  # the first batch teaches the budget the cost
    assert deliver_servicebus(fn, backend) == 1
    assert clock.now - 1000.0 == COST_S

    complete(backend, wf, [f"t{i}" for i in range(1, TASKS)])
    started = clock.now
    with pytest.raises(LockBudgetSpent):  # the host abandons: every message comes back
        deliver_servicebus(fn, backend)
    assert clock.now - started <= LOCK_S * BUDGET_SHARE < LOCK_S
    assert calls[1:] == [3]  # three fit into the 30 s budget at 10 s each
    done = statuses(backend, wf)
    assert [t for t, s in sorted(done.items()) if s == "completed"] == ["t0", "t1", "t2", "t3"]
    assert backend.queues.get(COMPLETIONS).approximate_count() == TASKS - 1  # none lost

    started = clock.now
    assert deliver_servicebus(fn, backend) == TASKS - 1  # the redelivery
    assert clock.now - started == 2 * COST_S  # only t4 and t5 were new
    assert calls[2:] == [3, 2]  # t1-t3 again (duplicates, free), then the rest
    assert set(statuses(backend, wf).values()) == {"completed"}
    client = WorkflowClient(backend)
    assert client.summary(wf)["status"] == "completed"
    assert {row["attempt"] for row in client.tasks(wf)} == {1}
    assert client.state(wf).outbox == {}
    assert backend.queues.get("default").approximate_count() == 0  # nothing re-dispatched
    assert backend.queues.get(COMPLETIONS).approximate_count() == 0


def test_a_fast_batch_is_applied_in_one_call(sqlite_runtime: Runtime) -> None:
    clock = FakeClock()
    fn = coordinator(sqlite_runtime, LockBudget(LOCK_S, clock=clock, sleep=clock.sleep))
    backend = sqlite_runtime.backend()
    wf = dispatch_all(backend, fn)
    calls: list[int] = []
    slow_apply(sqlite_runtime, clock, calls)
    complete(backend, wf, [f"t{i}" for i in range(TASKS)])
    assert deliver_servicebus(fn, backend) == TASKS  # no cost known yet: one chunk
    assert calls == [TASKS]
    assert WorkflowClient(backend).summary(wf)["status"] == "completed"


def test_one_chunk_always_runs_even_past_the_budget() -> None:
    budget = LockBudget(LOCK_S)
    budget.observe(1, 1000.0)
    assert budget.chunk(5, 0.0) == 1
    budget.observe(4, 4.0)
    assert budget.chunk(32, 10.0) == 10
    assert budget.chunk(3, 10.0) == 3


def test_an_outage_hold_is_cut_to_what_is_left_of_the_budget(
        sqlite_runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    from dagq.errors import StoreUnavailable
    from tests.functions.host import sb_message

    clock = FakeClock()
    fn = coordinator(sqlite_runtime, LockBudget(LOCK_S, clock=clock, sleep=clock.sleep))
    coord = sqlite_runtime.coordinator()

    def down(_: object) -> Applied:  # injected fault: the store is unreachable
        clock.now += 25.0
        raise StoreUnavailable("injected outage")

    monkeypatch.setattr(coord, "apply_messages", down)
    with pytest.raises(StoreUnavailable):
        fn([sb_message(b"{}", "m", delivery_count=8)])  # the hold alone would be 60 s
    assert clock.slept == [LOCK_S * BUDGET_SHARE - 25.0]


def test_the_lock_setting_is_read_and_checked() -> None:
    assert lock_budget({}).lock_s == DEFAULT_LOCK_S == 300.0
    assert lock_budget({LOCK_SETTING: "60"}).seconds == 60.0 * BUDGET_SHARE
    for bad in ("0", "301", "five", "nan"):
        with pytest.raises(ConfigError, match=LOCK_SETTING):
            lock_budget({LOCK_SETTING: bad})

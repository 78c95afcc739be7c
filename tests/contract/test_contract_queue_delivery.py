"""Contract: Queue batches, dead letters, concurrent receivers, long polls, queue names."""

from __future__ import annotations

import threading
import time

import pytest

from dagq.ports import Backend, Message, Queue
from tests.contract.factories import MAX_DELIVERIES
from tests.contract.helpers import eventually

LONG = 30.0


@pytest.fixture
def q(backend: Backend) -> Queue:
    return backend.queues.get("default")


def _drain(q: Queue, expected: int, batch: int = 10) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + 30
    while len(got) < expected and time.monotonic() < deadline:
        got += q.receive(batch, LONG, wait_s=1)
    return got


def test_send_many_and_batched_receive(q: Queue) -> None:
    q.send_many((f"m{i}".encode(), 0.0, f"id-{i}") for i in range(25))
    assert q.approximate_count() == 25
    first = q.receive(10, LONG, wait_s=5)
    assert 1 <= len(first) <= 10
    rest = _drain(q, 25 - len(first))
    bodies = sorted(m.body for m in first + rest)
    assert bodies == sorted(f"m{i}".encode() for i in range(25))
    q.delete_many(first + rest)
    assert q.approximate_count() == 0


def test_send_many_honours_each_delay(q: Queue) -> None:
    q.send_many([(b"now", 0.0, None), (b"later", LONG * 10, None)])
    assert [m.body for m in _drain(q, 1)] == [b"now"]
    assert q.receive(10, LONG) == []
    assert q.approximate_count() == 2


def test_empty_batches_are_fine(q: Queue) -> None:
    q.send_many([])
    q.delete_many([])
    assert q.approximate_count() == 0


def test_a_message_delivered_too_often_is_dead_lettered(q: Queue, tick: float) -> None:
    q.send(b"poison", message_id="wf/p/1")
    for n in range(1, MAX_DELIVERIES + 1):
        m = eventually(lambda: q.receive(1, tick), within_s=tick * 30)[0]
        assert m.delivery_count == n

    def dead_after_another_receive() -> list[tuple[Message, str]]:
        assert q.receive(1, tick, wait_s=tick) == [], "delivered more than max deliveries"
        return q.dead_letters()

    dead = eventually(dead_after_another_receive, within_s=tick * 30)
    assert len(dead) == 1
    message, reason = dead[0]
    assert message.body == b"poison"
    assert reason
    assert q.approximate_count() == 0


def test_dead_letter_moves_a_message_with_its_reason(q: Queue) -> None:
    q.send(b"bad json", message_id="x")
    q.send(b"good")
    bad = next(m for m in _drain(q, 2) if m.body == b"bad json")
    q.dead_letter(bad, "not valid JSON")
    assert [(m.body, r) for m, r in q.dead_letters()] == [(b"bad json", "not valid JSON")]
    assert q.approximate_count() == 1
    assert len(q.dead_letters(limit=1)) == 1


def test_concurrent_receivers_never_share_a_message(backend: Backend, other: Backend) -> None:
    total = 120
    backend.queues.get("default").send_many((f"{i}".encode(), 0.0, None) for i in range(total))
    seen: list[bytes] = []
    lock = threading.Lock()

    def consume(b: Backend) -> None:
        queue = b.queues.get("default")
        idle_polls = 0
        while idle_polls < 3:
            got = queue.receive(7, LONG, wait_s=0.3)
            idle_polls = 0 if got else idle_polls + 1
            with lock:
                seen.extend(m.body for m in got)

    threads = [threading.Thread(target=consume, args=(b,)) for b in (backend, other) * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == sorted(f"{i}".encode() for i in range(total))


def test_a_waiting_receive_gets_a_message_sent_meanwhile(
    backend: Backend, other: Backend
) -> None:
    result: list[Message] = []
    waiter = threading.Thread(
        target=lambda: result.extend(backend.queues.get("default").receive(1, LONG, wait_s=20))
    )
    waiter.start()
    time.sleep(0.2)
    other.queues.get("default").send(b"wake up")
    waiter.join()
    assert [m.body for m in result] == [b"wake up"]


def test_a_waiting_receive_returns_empty_not_before_its_wait(q: Queue, tick: float) -> None:
    start = time.monotonic()
    assert q.receive(1, LONG, wait_s=tick) == []
    assert time.monotonic() - start >= tick * 0.9


def test_queues_are_separate_and_listed_by_name(backend: Backend) -> None:
    gpu = backend.queues.get("gpu")
    cpu = backend.queues.get("cpu")
    backend.queues.get("completions").send(b"done")
    assert (gpu.name, cpu.name) == ("gpu", "cpu")
    gpu.send(b"for gpu")
    assert cpu.receive(10, LONG) == []
    assert [m.body for m in gpu.receive(10, LONG, wait_s=5)] == [b"for gpu"]
    names = backend.queues.names()
    assert {"gpu", "cpu"} <= set(names)
    assert "completions" not in names

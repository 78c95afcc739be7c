"""Contract: Queue basics (send/receive, visibility, receipts, extend, release, delays).

Hidden-message checks use long timeouts (30 s) so a slow machine cannot make them
flaky; reappearance checks use the backend's tick and only assert "not before".
"""

from __future__ import annotations

import contextlib
import time

import pytest

from dagq.errors import NotFound
from dagq.ports import Backend, Message, Queue
from tests.contract.factories import MAX_DELIVERIES, BackendFactory

LONG = 30.0


@pytest.fixture
def q(backend: Backend) -> Queue:
    return backend.queues.get("default")


def _one(q: Queue, vis: float, wait_s: float) -> Message:
    got = q.receive(1, vis, wait_s=wait_s)
    assert len(got) == 1, f"expected one message within {wait_s} s, got {got}"
    return got[0]


def test_send_then_receive(q: Queue) -> None:
    before = time.time()
    q.send(b'{"task": "a"}', message_id="wf/a/1")
    m = _one(q, LONG, wait_s=5)
    assert (m.id, m.body, m.delivery_count) == ("wf/a/1", b'{"task": "a"}', 1)
    assert m.receipt
    assert before - 5 <= m.enqueued_at <= time.time() + 5


def test_receive_on_an_empty_queue_returns_nothing(q: Queue) -> None:
    assert q.receive(10, LONG) == []
    assert q.approximate_count() == 0


def test_a_received_message_is_hidden_until_its_timeout(q: Queue) -> None:
    q.send(b"m")
    _one(q, LONG, wait_s=5)
    assert q.receive(10, LONG) == []
    assert q.approximate_count() == 1


def test_a_message_reappears_after_its_visibility_timeout(q: Queue, tick: float) -> None:
    q.send(b"m")
    start = time.monotonic()
    first = _one(q, tick, wait_s=5)
    second = _one(q, LONG, wait_s=tick * 30)
    assert time.monotonic() - start >= tick * 0.9  # not before the timeout
    assert second.body == b"m"
    assert second.delivery_count == 2
    assert second.receipt != first.receipt


def test_delete_removes_and_repeating_it_is_a_no_op(q: Queue) -> None:
    q.send(b"m")
    m = _one(q, LONG, wait_s=5)
    q.delete(m)
    assert q.approximate_count() == 0
    q.delete(m)


def test_a_stale_receipt_cannot_delete(q: Queue, tick: float) -> None:
    q.send(b"m")
    stale = _one(q, tick, wait_s=5)
    current = _one(q, LONG, wait_s=tick * 30)
    with contextlib.suppress(NotFound):
        q.delete(stale)
    assert q.approximate_count() == 1
    assert q.receive(1, LONG) == []  # the current holder's lock is intact
    q.delete(current)
    assert q.approximate_count() == 0


def test_extend_keeps_a_message_hidden_and_gives_a_working_receipt(
    q: Queue, tick: float
) -> None:
    q.send(b"m")
    m = _one(q, tick * 2, wait_s=5)
    extended = q.extend(m, LONG)
    assert (extended.id, extended.body) == (m.id, m.body)
    time.sleep(tick * 3)  # past the first timeout
    assert q.receive(1, LONG) == []
    q.delete(extended)
    assert q.approximate_count() == 0


def test_extend_after_redelivery_or_delete_raises_not_found(q: Queue, tick: float) -> None:
    q.send(b"m")
    stale = _one(q, tick, wait_s=5)
    current = _one(q, LONG, wait_s=tick * 30)
    with pytest.raises(NotFound):
        q.extend(stale, LONG)
    q.delete(current)
    with pytest.raises(NotFound):
        q.extend(current, LONG)


def test_release_makes_a_message_visible_at_once(q: Queue) -> None:
    q.send(b"m", message_id="k")
    m = _one(q, LONG, wait_s=5)
    q.release(m)
    again = _one(q, LONG, wait_s=5)
    assert again.body == b"m"
    q.delete(again)
    assert q.approximate_count() == 0


def test_releases_do_not_count_toward_max_deliveries(q: Queue) -> None:
    q.send(b"m")
    for _ in range(MAX_DELIVERIES * 2):
        q.release(_one(q, LONG, wait_s=5))
    assert _one(q, LONG, wait_s=5).body == b"m"
    assert q.dead_letters() == []


def test_a_stale_release_leaves_the_current_holder_alone(q: Queue, tick: float) -> None:
    q.send(b"m")
    stale = _one(q, tick, wait_s=5)
    _one(q, LONG, wait_s=tick * 30)
    with contextlib.suppress(NotFound):
        q.release(stale)
    assert q.receive(1, LONG) == []


def test_a_delayed_message_stays_hidden_but_counted(q: Queue) -> None:
    q.send(b"later", delay_s=LONG * 10)
    q.send(b"now")
    assert _one(q, LONG, wait_s=5).body == b"now"
    assert q.receive(10, LONG) == []
    # Storage queues and SQLite count the delayed message; Service Bus counts active ones
    assert q.approximate_count() in (1, 2)


def test_a_short_delay_is_honoured(q: Queue, tick: float) -> None:
    start = time.monotonic()
    q.send(b"m", delay_s=tick)
    m = _one(q, LONG, wait_s=tick * 30)
    assert time.monotonic() - start >= tick * 0.9
    assert m.delivery_count == 1


def test_repeated_message_ids_are_dropped_or_all_delivered_with_their_ids(
        q: Queue, factory: BackendFactory) -> None:
    """Backends that deduplicate drop repeats; the others deliver every copy, each with
    the sender's id (the engine then ignores the duplicate completion)."""
    if not factory.dedup:
        q.send(b"first", message_id="wf/a/1")
        q.send_many([(b"second", 0.0, "wf/a/1"), (b"other", 0.0, "wf/b/1")])
        got: list[Message] = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            got += q.receive(10, LONG, wait_s=2)
        assert sorted((m.id, m.body) for m in got) == [
            ("wf/a/1", b"first"), ("wf/a/1", b"second"), ("wf/b/1", b"other")]
        q.delete_many(got)
        return
    q.send(b"first", message_id="wf/a/1")
    q.send(b"second", message_id="wf/a/1")
    q.send_many([(b"third", 0.0, "wf/a/1"), (b"other", 0.0, "wf/b/1"),
                 (b"other again", 0.0, "wf/b/1")])
    assert q.approximate_count() == 2
    got = q.receive(10, LONG, wait_s=5)
    assert sorted(m.body for m in got) == [b"first", b"other"]
    q.delete_many(got)
    q.send(b"after delete", message_id="wf/a/1")  # within the dedup window
    assert q.receive(10, LONG) == []
    q.send(b"no id")
    q.send(b"no id")
    assert q.approximate_count() == 2

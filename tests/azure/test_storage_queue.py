"""Storage-Queue specifics: wire format, size limit, id frames, dead letters, polling."""

from __future__ import annotations

import base64
import json

import pytest
from azure.storage.queue import QueueClient

from dagq.backends.azure import AzureBackend
from dagq.backends.azure.storage_queue import FRAME, MAX_BODY, frame, unframe
from dagq.errors import StoreError
from tests.fixtures.azurite import ACCOUNT


def _raw(conn: str, queue: str) -> list[str]:
    """Stored texts of ``queue`` as any other reader (a Functions trigger) sees them."""
    client = QueueClient.from_connection_string(conn, queue)
    return [str(m.content) for m in client.peek_messages(max_messages=32)]


def test_the_completion_queue_holds_plain_base64_bodies(
    store: AzureBackend, azurite: str
) -> None:
    body = json.dumps({"type": "completion", "workflow_id": "wf"}).encode()
    store.queues.get("completions").send(body, message_id="ignored-here")
    [text] = _raw(azurite, store.names.queue("completions"))
    assert base64.b64decode(text) == body


def test_task_queue_messages_carry_the_senders_id_in_a_frame(
    store: AzureBackend, azurite: str
) -> None:
    q = store.queues.get("gpu")
    q.send(b"payload", message_id="wf/a/1")
    [text] = _raw(azurite, store.names.queue("gpu"))
    assert base64.b64decode(text) == FRAME + b"wf/a/1\x00payload"
    [m] = q.receive(1, 60)
    assert (m.id, m.body) == ("wf/a/1", b"payload")


@pytest.mark.parametrize(("body", "message_id"), [
    (b"plain", None), (b"", "id"), (FRAME + b"looks framed", None), (b"\x00\xff", "x/y/1"),
])
def test_frames_round_trip(body: bytes, message_id: str | None) -> None:
    assert unframe(frame(body, message_id)) == (message_id, body)


def test_the_largest_body_fits_and_a_larger_one_is_refused(store: AzureBackend) -> None:
    q = store.queues.get("default")
    biggest = bytes(range(256)) * (MAX_BODY // 256)
    q.send(biggest, message_id="too-long-to-frame")  # sent unframed: no room for the id
    [m] = q.receive(1, 60)
    assert m.body == biggest and m.id != "too-long-to-frame"
    before = store.stats.total
    with pytest.raises(StoreError, match="at most 49152 bytes"):
        q.send(biggest + b"!")
    assert store.stats.total == before


def test_dead_letters_keep_large_bodies_and_list_beyond_one_peek(store: AzureBackend) -> None:
    q, other = store.queues.get("default"), store.queues.get("other")
    big = b"x" * MAX_BODY
    q.send(big)
    q.send_many((f"m{i}".encode(), 0.0, f"id{i}") for i in range(39))
    other.send(b"not mine")
    got = q.receive(32, 60) + q.receive(32, 60)
    assert len(got) == 40
    for m in got:
        q.dead_letter(m, f"bad {m.id}")
    other.dead_letter(other.receive(1, 60)[0], "elsewhere")
    dead = q.dead_letters(limit=100)
    assert len(dead) == 40
    assert {m.body for m, _ in dead} == {big} | {f"m{i}".encode() for i in range(39)}
    assert all(reason == f"bad {m.id}" for m, reason in dead)
    assert [(m.body, r) for m, r in other.dead_letters()] == [(b"not mine", "elsewhere")]
    assert len(q.dead_letters(limit=100)) == 40  # listing hid nothing
    assert len(q.dead_letters(limit=5)) == 5
    assert q.approximate_count() == 0


def test_an_empty_wait_polls_with_growing_pauses(store: AzureBackend) -> None:
    q = store.queues.get("default")
    before = store.stats.snapshot().get("queue.receive", 0)
    assert q.receive(1, 60, wait_s=1.5) == []
    polls = store.stats.snapshot()["queue.receive"] - before
    assert 2 <= polls <= 8


def test_a_backend_on_the_same_store_sees_the_same_queues(
    store: AzureBackend, azurite_store: tuple[str, str]
) -> None:
    store.queues.get("cpu").send(b"hello", message_id="k")
    from dagq.backends.azure import open_azure_backend

    url = f"azure://{ACCOUNT}/{store.names.prefix}"
    second = open_azure_backend(url, connection_string=azurite_store[1])
    try:
        assert "cpu" in second.queues.names()
        [m] = second.queues.get("cpu").receive(1, 60)
        assert (m.id, m.body) == ("k", b"hello")
    finally:
        second.close()

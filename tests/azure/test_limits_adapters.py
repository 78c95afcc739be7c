"""The Azure adapters refuse, before any request, what the real services would reject,
even though Azurite (``--loose``) would take it: each limit exactly at, and one over."""

from __future__ import annotations

import pytest

from dagq.backends.azure import AzureBackend
from dagq.core import limits
from dagq.errors import StoreError

pytestmark = pytest.mark.azurite


def test_blob_names_at_and_over_1024_characters(store: AzureBackend) -> None:
    at = "outputs/" + "a" * (limits.BLOB_NAME_MAX_CHARS - len("outputs/"))
    store.outputs.put(at, b"x")
    assert store.outputs.get(at) == b"x"
    with pytest.raises(StoreError) as err:
        store.outputs.put(at + "a", b"x")
    assert "1025 characters long; Azure Blob Storage allows 1024" in str(err.value)


@pytest.mark.parametrize("name", ["files/wf/x./f", "files/wf/../f", "files/wf//f"])
def test_blob_names_the_service_would_rewrite_are_refused(
        store: AzureBackend, name: str) -> None:
    with pytest.raises(StoreError) as err:
        store.outputs.put(name, b"x")
    assert "would drop or rewrite" in str(err.value)


def test_record_keys_at_and_over_1_kib(store: AzureBackend) -> None:
    at = "k" * (limits.TABLE_KEY_MAX_BYTES // 2)
    store.records.put("p", at, {"v": 1})
    assert store.records.get("p", at)[0] == {"v": 1}
    with pytest.raises(StoreError) as err:
        store.records.put("p", at + "k", {"v": 1})
    assert "1026 bytes as a Table key; Azure Table Storage allows 1024" in str(err.value)


def test_record_values_at_and_over_the_string_property_limit(store: AzureBackend) -> None:
    room = limits.TABLE_STRING_MAX_BYTES // 2 - len('{"v": ""}')
    store.records.put("p", "big", {"v": "x" * room})
    with pytest.raises(StoreError) as err:
        store.records.put("p", "big", {"v": "x" * (room + 1)})
    assert "Azure Table Storage allows 65536 per string property" in str(err.value)
    assert store.records.get("p", "big")[0] == {"v": "x" * room}  # nothing was written


def test_queue_bodies_at_and_over_the_message_size(store: AzureBackend) -> None:
    q = store.queues.get("limits")
    q.send(b"x" * limits.STORAGE_QUEUE_BODY_BYTES)
    with pytest.raises(StoreError) as err:
        q.send(b"x" * (limits.STORAGE_QUEUE_BODY_BYTES + 1))
    assert f"at most {limits.STORAGE_QUEUE_BODY_BYTES} bytes" in str(err.value)
    got = q.receive(1, 30, wait_s=5)
    assert len(got) == 1 and len(got[0].body) == limits.STORAGE_QUEUE_BODY_BYTES

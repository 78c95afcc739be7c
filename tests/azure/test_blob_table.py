"""Blob and Table specifics: stored MD5s, missing containers and tables, escaped keys."""

from __future__ import annotations

import hashlib

import pytest
from azure.data.tables import TableClient
from azure.storage.blob import BlobClient

from dagq.backends.azure import AzureBackend
from dagq.errors import NotFound
from dagq.ports import IndexRow


def test_outputs_carry_their_md5_as_a_blob_property(store: AzureBackend, azurite: str) -> None:
    data = b"\x00" * 70_000
    store.outputs.put("files/wf/t/model.bin", data)
    blob = BlobClient.from_connection_string(azurite, store.names.outputs_container,
                                             "files/wf/t/model.bin")
    md5 = blob.get_blob_properties().content_settings.content_md5
    assert md5 is not None and bytes(md5) == hashlib.md5(data).digest()


def test_a_fresh_store_reads_as_empty(store: AzureBackend) -> None:
    before = store.stats.total
    assert list(store.states.list_ids()) == []
    assert store.outputs.list("") == []
    assert store.index.query() == []
    assert store.records.list("p") == []
    assert store.queues.names() == []
    with pytest.raises(NotFound):
        store.states.replace("wf", b"x", '"0x1"')
    with pytest.raises(NotFound):
        store.outputs.get("outputs/x")
    with pytest.raises(NotFound):
        store.index.get("wf")
    with pytest.raises(NotFound):
        store.records.get("p", "k")
    store.records.delete("p", "k")
    assert store.stats.total - before == 10  # nothing was created


KEYS = ["a/b", "a/c#1", "q?x=1", "100%", "back\\slash", "tab\tkey", "plain", "ünï"]


def test_record_keys_and_partitions_may_hold_any_character(
    store: AzureBackend, azurite: str
) -> None:
    for key in KEYS:
        store.records.put("dirs/wf", key, {"key": key})
    assert store.records.list("dirs/wf") == [(k, {"key": k}) for k in sorted(KEYS)]
    assert store.records.list("dirs/wf", "a/") == [("a/b", {"key": "a/b"}),
                                                  ("a/c#1", {"key": "a/c#1"})]
    assert store.records.get("dirs/wf", "q?x=1")[0] == {"key": "q?x=1"}
    table = TableClient.from_connection_string(azurite, store.names.records_table)
    assert {e["RowKey"] for e in table.list_entities()} >= {"a%2Fb", "100%25", "tab%09key"}


def test_index_rows_are_plain_table_entities(store: AzureBackend, azurite: str) -> None:
    store.index.create(IndexRow(id="wf-1", name="etl", status="pending",
                                counts={"pending": 2}, created_at=5.0))
    store.index.update_progress("wf-1", status="running", counts={"running": 2},
                                updated_at=6.0)
    table = TableClient.from_connection_string(azurite, store.names.index_table)
    entity = table.get_entity("wf", "wf-1")
    assert (entity["name"], entity["status"], entity["counts"], entity["updated_at"]) == (
        "etl", "running", '{"running": 2}', 6.0)
    assert entity["cancel_requested"] is False

"""Every storage request is counted by kind, and steady-state operations cost one each."""

from __future__ import annotations

import pytest

from dagq.backends.azure import AzureBackend
from dagq.backends.azure.transport import classify
from dagq.ports import IndexRow


def _delta(store: AzureBackend, before: dict[str, int]) -> dict[str, int]:
    now = store.stats.snapshot()
    return {k: now[k] - before.get(k, 0) for k in now if now[k] != before.get(k, 0)}


def test_first_writes_create_containers_then_each_operation_is_one_request(
    store: AzureBackend,
) -> None:
    before = store.stats.snapshot()
    etag = store.states.create("wf-1", b"{}")
    assert _delta(store, before) == {"blob.write": 2, "blob.setup": 1}  # 404, create, retry

    before = store.stats.snapshot()
    etag = store.states.replace("wf-1", b"{1}", etag)
    store.states.read("wf-1")
    store.states.create("wf-2", b"{}")
    store.outputs.put("outputs/wf-1/a/1.json", b"[]")  # outputs container: created once
    store.outputs.put("outputs/wf-1/b/1.json", b"[]")
    assert _delta(store, before) == {"blob.write": 5, "blob.setup": 1, "blob.read": 1}


def test_index_progress_and_queries_cost_one_request(store: AzureBackend) -> None:
    store.index.create(IndexRow(id="wf-0", name="etl", status="pending"))
    before = store.stats.snapshot()
    store.index.create(IndexRow(id="wf-1", name="etl", status="pending"))
    store.index.update_progress("wf-1", status="running", counts={"running": 1},
                                updated_at=2.0)
    store.index.request_cancel("wf-1")
    assert [r.id for r in store.index.query(name_prefix="etl", limit=1)] == ["wf-0"]
    store.index.get("wf-1")
    assert _delta(store, before) == {"table.write": 3, "table.read": 2}


def test_queue_operations_and_batched_receives(store: AzureBackend) -> None:
    before = store.stats.snapshot()
    q = store.queues.get("default")
    q.send_many((f"m{i}".encode(), 0.0, f"k{i}") for i in range(40))
    first = q.receive(32, 60)
    rest = q.receive(32, 60)
    assert (len(first), len(rest)) == (32, 8)
    q.delete_many(first + rest)
    assert q.receive(32, 60) == []
    assert _delta(store, before) == {"queue.setup": 1, "queue.send": 40,
                                     "queue.receive": 3, "queue.delete": 40}


def test_a_task_lifecycle_costs_at_most_six_requests(store: AzureBackend) -> None:
    """Adapter-level walk of the dispatch/run/complete loop for a 64-task fan-out."""
    tasks = store.queues.get("default")
    completions = store.queues.get("completions")
    etag = store.states.create("wf", b"state")
    before = store.stats.total
    tasks.send_many((f"task {i}".encode(), 0.0, f"wf/t{i}/1") for i in range(64))
    for _ in range(64):  # a worker: one task at a time
        [m] = tasks.receive(1, 60)
        completions.send(b"done " + m.body)
        tasks.delete(m)
    applied = 0
    while applied < 64:  # the coordinator: batches, one state write per batch
        batch = completions.receive(32, 60)
        etag = store.states.replace("wf", b"state %d" % applied, etag)
        completions.delete_many(batch)
        applied += len(batch)
    per_task = (store.stats.total - before) / 64
    assert per_task <= 6, store.stats.snapshot()


@pytest.mark.parametrize(("service", "method", "url", "kind"), [
    ("blob", "PUT", "http://h/acct/c/b.state", "blob.write"),
    ("blob", "GET", "http://h/acct/c/b.state", "blob.read"),
    ("blob", "HEAD", "http://h/acct/c/b.state", "blob.read"),
    ("blob", "GET", "http://h/acct/c?restype=container&comp=list", "blob.read"),
    ("blob", "PUT", "http://h/acct/c?restype=container", "blob.setup"),
    ("queue", "POST", "http://h/acct/q/messages", "queue.send"),
    ("queue", "GET", "http://h/acct/q/messages?numofmessages=32", "queue.receive"),
    ("queue", "GET", "http://h/acct/q/messages?peekonly=true", "queue.read"),
    ("queue", "DELETE", "http://h/acct/q/messages/id?popreceipt=x", "queue.delete"),
    ("queue", "PUT", "http://h/acct/q/messages/id?popreceipt=x", "queue.update"),
    ("queue", "PUT", "http://h/acct/q", "queue.setup"),
    ("queue", "GET", "http://h/acct/q?comp=metadata", "queue.read"),
    ("table", "GET", "http://h/acct/t(PartitionKey='wf',RowKey='a')", "table.read"),
    ("table", "PATCH", "http://h/acct/t(PartitionKey='wf',RowKey='a')", "table.write"),
    ("table", "POST", "http://h/acct/$batch", "table.write"),
    ("table", "POST", "http://h/acct/Tables", "table.setup"),
])
def test_request_kinds(service: str, method: str, url: str, kind: str) -> None:
    assert classify(service, method, url) == kind

"""Contract: OutputStore (bytes with MD5), Records (JSON with ETags), request stats."""

from __future__ import annotations

import hashlib
import threading

import pytest

from dagq.errors import AlreadyExists, NotFound, PreconditionFailed
from dagq.ports import Backend


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def test_output_put_returns_md5_and_get_returns_the_bytes(backend: Backend) -> None:
    data = b'{"rows": 12}' * 5000
    assert backend.outputs.put("outputs/wf/t/1.json", data) == _md5(data)
    assert backend.outputs.get("outputs/wf/t/1.json") == data
    assert backend.outputs.put("files/wf/t/empty", b"") == _md5(b"")
    assert backend.outputs.get("files/wf/t/empty") == b""


def test_output_put_overwrites(backend: Backend) -> None:
    backend.outputs.put("x", b"old")
    assert backend.outputs.put("x", b"new") == _md5(b"new")
    assert backend.outputs.get("x") == b"new"
    assert backend.outputs.list("x") == [("x", 3, _md5(b"new"))]


def test_output_get_of_a_missing_name_raises_not_found(backend: Backend) -> None:
    with pytest.raises(NotFound):
        backend.outputs.get("outputs/none")


def test_output_list_filters_by_prefix(backend: Backend) -> None:
    for name, data in [("dirs/wf/t/a.txt", b"a"), ("dirs/wf/t/sub/b.txt", b"bb"),
                       ("dirs/wf/u/c.txt", b"ccc"), ("files/wf/t/d", b"dddd")]:
        backend.outputs.put(name, data)
    assert sorted(backend.outputs.list("dirs/wf/t/")) == [
        ("dirs/wf/t/a.txt", 1, _md5(b"a")), ("dirs/wf/t/sub/b.txt", 2, _md5(b"bb"))]
    assert len(backend.outputs.list("")) == 4
    assert backend.outputs.list("nothing/") == []


def test_record_upsert_get_and_etags(backend: Backend) -> None:
    e1 = backend.records.put("heartbeats", "host:1", {"queue": "gpu", "at": 1.5})
    assert backend.records.get("heartbeats", "host:1") == ({"queue": "gpu", "at": 1.5}, e1)
    e2 = backend.records.put("heartbeats", "host:1", {"queue": "gpu", "at": 2.5})
    assert e2 != e1
    assert backend.records.get("heartbeats", "host:1") == ({"queue": "gpu", "at": 2.5}, e2)


def test_record_conditional_put(backend: Backend) -> None:
    e1 = backend.records.put("schedules", "nightly", {"next": 1})
    e2 = backend.records.put("schedules", "nightly", {"next": 2}, etag=e1)
    with pytest.raises(PreconditionFailed):
        backend.records.put("schedules", "nightly", {"next": 3}, etag=e1)
    assert backend.records.get("schedules", "nightly") == ({"next": 2}, e2)
    with pytest.raises(PreconditionFailed):
        backend.records.put("schedules", "absent", {"next": 3}, etag=e2)


def test_record_create_only(backend: Backend) -> None:
    etag = backend.records.put("locks", "sweeper", {"owner": "a"}, etag="*new")
    with pytest.raises(AlreadyExists):
        backend.records.put("locks", "sweeper", {"owner": "b"}, etag="*new")
    assert backend.records.get("locks", "sweeper") == ({"owner": "a"}, etag)


def test_record_delete_and_missing(backend: Backend) -> None:
    backend.records.put("p", "k", {"v": 1})
    backend.records.delete("p", "k")
    backend.records.delete("p", "k")  # absent: no error
    with pytest.raises(NotFound):
        backend.records.get("p", "k")
    backend.records.put("p", "k", {"v": 2}, etag="*new")
    assert backend.records.get("p", "k")[0] == {"v": 2}


def test_record_list_is_per_partition_ordered_by_key(backend: Backend) -> None:
    for key in ("b", "a", "ab", "c"):
        backend.records.put("p1", key, {"k": key})
    backend.records.put("p2", "a", {"k": "other"})
    assert backend.records.list("p1") == [(k, {"k": k}) for k in ("a", "ab", "b", "c")]
    assert backend.records.list("p1", "a") == [("a", {"k": "a"}), ("ab", {"k": "ab"})]
    assert backend.records.list("p2") == [("a", {"k": "other"})]
    assert backend.records.list("p3") == []


def test_record_put_many_upserts_in_batches(backend: Backend) -> None:
    backend.records.put("pm", "k/000", {"old": True})
    items = [(f"k/{i:03d}", {"i": i, "text": "x" * 200}) for i in range(250)]  # > 100
    backend.records.put_many("pm", items)
    backend.records.put_many("pm", [])
    assert backend.records.list("pm") == items  # the existing record was replaced
    backend.records.put_many("fresh-partition", [("a/b#c?d", {"odd": "key"})])
    assert backend.records.list("fresh-partition") == [("a/b#c?d", {"odd": "key"})]


def test_record_compare_and_swap_loses_no_update(backend: Backend, other: Backend) -> None:
    backend.records.put("p", "n", {"n": 0})

    def bump(b: Backend) -> None:
        for _ in range(10):
            while True:
                value, etag = b.records.get("p", "n")
                try:
                    b.records.put("p", "n", {"n": value["n"] + 1}, etag=etag)
                    break
                except PreconditionFailed:
                    continue

    threads = [threading.Thread(target=bump, args=(b,)) for b in (backend, other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert backend.records.get("p", "n")[0] == {"n": 20}


def test_stats_count_requests(backend: Backend) -> None:
    before = backend.stats.total
    backend.states.create("wf", b"x")
    backend.states.read("wf")
    backend.queues.get("default").send(b"m")
    assert backend.stats.total >= before + 3
    assert sum(backend.stats.snapshot().values()) == backend.stats.total


def test_output_delete_removes_one_object_and_is_idempotent(backend: Backend) -> None:
    backend.outputs.put("logs/wf/a/1/x.log", b"1")
    backend.outputs.put("logs/wf/a/1/y.log", b"2")
    backend.outputs.delete("logs/wf/a/1/x.log")
    backend.outputs.delete("logs/wf/a/1/x.log")
    backend.outputs.delete("never/was")
    assert [n for n, _, _ in backend.outputs.list("logs/wf/")] == ["logs/wf/a/1/y.log"]

"""Contract: StateStore (state blobs with ETags and conditional writes)."""

from __future__ import annotations

import threading

import pytest

from dagq.errors import AlreadyExists, NotFound, PreconditionFailed
from dagq.ports import Backend


def test_create_then_read_returns_the_bytes_and_etag(backend: Backend) -> None:
    etag = backend.states.create("wf-1", b"\x00state\xff")
    assert etag
    assert backend.states.read("wf-1") == (b"\x00state\xff", etag)


def test_create_is_create_only(backend: Backend) -> None:
    backend.states.create("wf-1", b"first")
    with pytest.raises(AlreadyExists):
        backend.states.create("wf-1", b"second")
    assert backend.states.read("wf-1")[0] == b"first"


def test_read_of_a_missing_state_raises_not_found(backend: Backend) -> None:
    with pytest.raises(NotFound):
        backend.states.read("nope")


def test_replace_with_the_current_etag_writes_and_changes_the_etag(backend: Backend) -> None:
    e1 = backend.states.create("wf-1", b"v1")
    e2 = backend.states.replace("wf-1", b"v2", e1)
    assert e2 != e1
    assert backend.states.read("wf-1") == (b"v2", e2)
    e3 = backend.states.replace("wf-1", b"v3", e2)
    assert len({e1, e2, e3}) == 3


def test_replace_with_a_stale_etag_fails_and_keeps_the_data(backend: Backend) -> None:
    e1 = backend.states.create("wf-1", b"v1")
    backend.states.replace("wf-1", b"v2", e1)
    with pytest.raises(PreconditionFailed):
        backend.states.replace("wf-1", b"lost", e1)
    with pytest.raises(PreconditionFailed):
        backend.states.replace("wf-1", b"lost", "not-an-etag")
    assert backend.states.read("wf-1")[0] == b"v2"


def test_replace_of_a_missing_state_raises_not_found(backend: Backend) -> None:
    with pytest.raises(NotFound):
        backend.states.replace("nope", b"x", "1")


def test_two_writers_with_the_same_etag_one_wins(backend: Backend, other: Backend) -> None:
    backend.states.create("wf-1", b"v0")
    _, seen_a = backend.states.read("wf-1")
    _, seen_b = other.states.read("wf-1")
    backend.states.replace("wf-1", b"from a", seen_a)
    with pytest.raises(PreconditionFailed):
        other.states.replace("wf-1", b"from b", seen_b)
    assert other.states.read("wf-1")[0] == b"from a"


def test_concurrent_compare_and_swap_loses_no_update(backend: Backend, other: Backend) -> None:
    backend.states.create("counter", b"0")
    per_thread = 15

    def bump(b: Backend) -> None:
        for _ in range(per_thread):
            while True:
                data, etag = b.states.read("counter")
                try:
                    b.states.replace("counter", str(int(data) + 1).encode(), etag)
                    break
                except PreconditionFailed:
                    continue

    threads = [threading.Thread(target=bump, args=(b,)) for b in (backend, other) * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert int(backend.states.read("counter")[0]) == per_thread * len(threads)


def test_list_ids_filters_by_prefix(backend: Backend) -> None:
    for wid in ("a-1", "a-2", "ab", "b-1", "a"):
        backend.states.create(wid, b"{}")
    assert sorted(backend.states.list_ids("a-")) == ["a-1", "a-2"]
    assert sorted(backend.states.list_ids("a")) == ["a", "a-1", "a-2", "ab"]
    assert sorted(backend.states.list_ids()) == ["a", "a-1", "a-2", "ab", "b-1"]
    assert list(backend.states.list_ids("zzz")) == []


def test_large_state_round_trips(backend: Backend) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    etag = backend.states.create("big", data)
    assert backend.states.read("big") == (data, etag)


def test_delete_removes_a_state_and_is_idempotent(backend: Backend) -> None:
    backend.states.create("gone-1", b"x")
    backend.states.create("kept-1", b"y")
    for wid in ("gone-1", "gone-1", "never-was"):  # twice, and one that never existed
        backend.states.delete(wid)
    with pytest.raises(NotFound):
        backend.states.read("gone-1")
    assert backend.states.read("kept-1")[0] == b"y"


SMALL, LARGE = b"snap", bytes(range(256)) * 64  # one Put Blob on Azure / written as blocks


@pytest.mark.parametrize("snapshot", [SMALL, LARGE], ids=["small", "large"])
def test_append_adds_after_the_stored_bytes_under_the_etag(backend: Backend,
                                                           snapshot: bytes) -> None:
    e1 = backend.states.create("wf-1", snapshot)
    e2 = backend.states.append("wf-1", b"+d1", e1)
    e3 = backend.states.append("wf-1", b"+d2", e2)
    assert len({e1, e2, e3}) == 3
    assert backend.states.read("wf-1") == (snapshot + b"+d1+d2", e3)
    with pytest.raises(PreconditionFailed):
        backend.states.append("wf-1", b"+lost", e2)
    assert backend.states.read("wf-1")[0] == snapshot + b"+d1+d2"


@pytest.mark.parametrize("snapshot", [SMALL, LARGE], ids=["small", "large"])
def test_replace_drops_the_appends(backend: Backend, snapshot: bytes) -> None:
    e1 = backend.states.create("wf-1", snapshot)
    e2 = backend.states.append("wf-1", b"+d1", e1)
    e3 = backend.states.replace("wf-1", snapshot[::-1], e2)
    assert backend.states.read("wf-1") == (snapshot[::-1], e3)
    e4 = backend.states.append("wf-1", b"+d2", e3)
    assert backend.states.read("wf-1") == (snapshot[::-1] + b"+d2", e4)


@pytest.mark.parametrize("snapshot", [SMALL, LARGE], ids=["small", "large"])
def test_etag_names_the_stored_version_without_reading_it(backend: Backend,
                                                          snapshot: bytes) -> None:
    e1 = backend.states.create("wf-1", snapshot)
    assert backend.states.etag("wf-1") == e1
    e2 = backend.states.append("wf-1", b"+d1", e1)
    assert backend.states.etag("wf-1") == e2 == backend.states.read("wf-1")[1]
    e3 = backend.states.replace("wf-1", snapshot, e2)
    assert backend.states.etag("wf-1") == e3 != e2
    with pytest.raises(NotFound):
        backend.states.etag("nope")


def test_append_of_a_missing_state_raises_not_found(backend: Backend) -> None:
    with pytest.raises(NotFound):
        backend.states.append("nope", b"x", "1")


def test_two_appenders_with_the_same_etag_one_wins(backend: Backend, other: Backend) -> None:
    backend.states.create("wf-1", LARGE)
    _, seen_a = backend.states.read("wf-1")
    _, seen_b = other.states.read("wf-1")
    backend.states.append("wf-1", b"+from a", seen_a)
    with pytest.raises(PreconditionFailed):
        other.states.append("wf-1", b"+from b", seen_b)
    data, etag = other.states.read("wf-1")
    assert data == LARGE + b"+from a"
    other.states.append("wf-1", b"+then b", etag)  # from a list it did not write itself
    assert backend.states.read("wf-1")[0] == LARGE + b"+from a+then b"


def test_concurrent_appends_and_replaces_lose_no_update(backend: Backend,
                                                        other: Backend) -> None:
    backend.states.create("log", LARGE)
    per_thread = 10

    def add(b: Backend, mark: bytes) -> None:
        for k in range(per_thread):
            while True:
                data, etag = b.states.read("log")
                try:
                    if k % 4 == 3:  # now and then a compaction rewrites the whole state
                        b.states.replace("log", data + mark, etag)
                    else:
                        b.states.append("log", mark, etag)
                    break
                except PreconditionFailed:
                    continue

    marks = [b"<a>", b"<b>", b"<c>", b"<d>"]
    threads = [threading.Thread(target=add, args=(b, m))
               for b, m in zip((backend, other) * 2, marks, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    data = backend.states.read("log")[0]
    assert data.startswith(LARGE)
    assert all(data.count(m) == per_thread for m in marks)


def test_a_deleted_state_keeps_no_appends(backend: Backend) -> None:
    e1 = backend.states.create("wf-1", LARGE)
    backend.states.append("wf-1", b"+old", e1)
    backend.states.delete("wf-1")
    backend.states.create("wf-1", SMALL)
    assert backend.states.read("wf-1")[0] == SMALL

"""SQLite-specific behaviour beyond the shared contract suite."""

from __future__ import annotations

import gc
import multiprocessing
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dagq.backends import open_backend
from dagq.backends.sqlite import SqliteBackend
from dagq.backends.sqlite.db import ABOVE_ALL_TEXT, SCHEMA_VERSION, prefix_upper_bound
from dagq.errors import ConfigError, NotFound, StoreUnavailable


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[SqliteBackend]:
    b = SqliteBackend(tmp_path / "store.db", max_deliveries=2, dedup_window_s=0.3)
    yield b
    b.close()


@pytest.mark.parametrize("url", ["sqlite:{d}/a/b/store.db", "sqlite://{d}/a/b/store.db"])
def test_open_backend_creates_the_file_and_its_directories(tmp_path: Path, url: str) -> None:
    backend = open_backend(url.format(d=tmp_path), max_deliveries=4, connection_string=None,
                           pool_size=4)  # an Azure option: typed, and unused here
    assert isinstance(backend, SqliteBackend)
    backend.states.create("wf", b"x")
    backend.close()
    assert (tmp_path / "a" / "b" / "store.db").is_file()


@pytest.mark.parametrize("url", ["redis://x", "", "sqlite:", "sqlite::memory:", "/tmp/x.db"])
def test_open_backend_rejects_bad_urls_naming_the_setting(url: str) -> None:
    with pytest.raises(ConfigError) as err:
        open_backend(url)
    assert "DAGQ_STORE" in str(err.value)
    assert repr(url) in str(err.value)
    assert "sqlite:.dagq/dagq.db" in str(err.value)


def test_unknown_backend_options_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="some_azure_option"):
        open_backend(f"sqlite:{tmp_path}/s.db", some_azure_option="typo")


def test_separate_queues_need_an_azure_store(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="DAGQ_QUEUES"):
        open_backend(f"sqlite:{tmp_path}/s.db", queues_url="sb://ns")


def test_the_file_is_in_wal_mode_with_the_schema_version(backend: SqliteBackend) -> None:
    conn = sqlite3.connect(backend.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_data_survives_reopening(tmp_path: Path) -> None:
    first = SqliteBackend(tmp_path / "s.db")
    first.states.create("wf", b"kept")
    first.queues.get("gpu").send(b"m")
    first.close()
    second = SqliteBackend(tmp_path / "s.db")
    assert second.states.read("wf")[0] == b"kept"
    assert second.queues.names() == ["gpu"]
    assert second.queues.get("gpu").approximate_count() == 1
    second.close()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "s.db")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreUnavailable, match="newer"):
        SqliteBackend(tmp_path / "s.db")


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    (tmp_path / "s.db").write_bytes(b"definitely not sqlite" * 100)
    with pytest.raises(StoreUnavailable, match=r"s\.db"):
        SqliteBackend(tmp_path / "s.db")


def test_a_closed_backend_refuses_use(backend: SqliteBackend) -> None:
    backend.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        backend.states.read("wf")


def test_each_thread_has_its_own_connection(backend: SqliteBackend) -> None:
    conns = []
    db = backend._db
    t = threading.Thread(target=lambda: conns.append(db.conn()))
    t.start()
    t.join()
    assert conns[0] is not db.conn()


def _use_after_fork(path: str, out: multiprocessing.SimpleQueue[str]) -> None:
    # The parent's connection object was copied by fork; the child must open its own.
    backend = _inherited[0]
    backend.states.create("from-child", b"x")
    out.put(backend.states.read("from-parent")[0].decode())
    backend.close()  # must leave the parent's inherited connection alone
    _inherited.clear()
    del backend
    gc.collect()


_inherited: list[SqliteBackend] = []


def test_a_forked_child_opens_its_own_connection(backend: SqliteBackend) -> None:
    backend.states.create("from-parent", b"hello")
    _inherited[:] = [backend]
    ctx = multiprocessing.get_context("fork")
    out: multiprocessing.SimpleQueue[str] = ctx.SimpleQueue()
    p = ctx.Process(target=_use_after_fork, args=(str(backend.path), out))
    p.start()
    p.join(30)
    assert p.exitcode == 0
    assert out.get() == "hello"
    assert backend.states.read("from-child")[0] == b"x"
    backend.states.create("after-child", b"y")
    assert backend.states.read("after-child")[0] == b"y"


def test_receipts_change_on_extend(backend: SqliteBackend) -> None:
    q = backend.queues.get("q")
    q.send(b"m")
    m = q.receive(1, 30)[0]
    extended = q.extend(m, 30)
    assert extended.receipt != m.receipt
    q.delete(m)  # stale: no effect
    assert q.approximate_count() == 1
    with pytest.raises(NotFound):
        q.extend(m, 30)
    q.delete(extended)
    assert q.approximate_count() == 0


def test_release_does_not_count_a_delivery(backend: SqliteBackend) -> None:
    q = backend.queues.get("q")
    q.send(b"m")
    q.release(q.receive(1, 30)[0])
    assert q.receive(1, 30)[0].delivery_count == 1


def test_dedup_ends_after_the_window_and_tombstones_are_purged(
    backend: SqliteBackend,
) -> None:
    q = backend.queues.get("q")
    q.send(b"one", message_id="k")
    q.delete(q.receive(1, 30)[0])
    q.send(b"dropped", message_id="k")
    assert q.approximate_count() == 0
    time.sleep(0.35)
    q.send(b"two", message_id="k")
    assert [m.body for m in q.receive(1, 30)] == [b"two"]
    conn = sqlite3.connect(backend.path)
    conn.execute("UPDATE tombstones SET deleted_at = 0")
    conn.commit()
    q._next_purge = 0.0  # type: ignore[attr-defined]
    q.delete_many([])
    assert conn.execute("SELECT count(*) FROM tombstones").fetchone()[0] == 0
    conn.close()


def test_a_dead_lettered_id_is_not_accepted_again(backend: SqliteBackend) -> None:
    q = backend.queues.get("q")
    q.send(b"m", message_id="k")
    q.dead_letter(q.receive(1, 30)[0], "broken")
    q.send(b"m", message_id="k")
    assert q.approximate_count() == 0
    assert [(m.id, m.receipt, r) for m, r in q.dead_letters()] == [("k", "", "broken")]


def test_max_deliveries_comes_from_the_constructor(backend: SqliteBackend) -> None:
    q = backend.queues.get("q")
    q.send(b"m")
    for _ in range(2):
        m = q.receive(1, 30)[0]
        conn = sqlite3.connect(backend.path)
        conn.execute("UPDATE messages SET visible_at = 0")  # expire the lock at once
        conn.commit()
        conn.close()
    assert q.receive(1, 30) == []
    (dead, reason), = q.dead_letters()
    assert (dead.body, dead.delivery_count) == (b"m", 2)
    assert "2" in reason
    assert m.delivery_count == 2


def test_stats_name_each_call(backend: SqliteBackend) -> None:
    backend.states.create("wf", b"x")
    _, etag = backend.states.read("wf")
    backend.states.replace("wf", b"y", etag)
    q = backend.queues.get("q")
    q.send(b"m")
    q.delete_many(q.receive(5, 30))
    assert backend.stats.snapshot() == {
        "state.create": 1, "state.read": 1, "state.replace": 1, "queue.send": 1,
        "queue.receive": 1, "queue.delete_many": 1,
    }


@pytest.mark.parametrize(("prefix", "upper"), [
    ("abc", "abd"), ("a\U0010ffff", "b"), ("\U0010ffff", ABOVE_ALL_TEXT), ("", ABOVE_ALL_TEXT),
    ("x\ud7ff", "x\ue000"),
])
def test_prefix_upper_bound(prefix: str, upper: str | bytes) -> None:
    assert prefix_upper_bound(prefix) == upper


def test_name_prefix_query_handles_the_highest_code_point(backend: SqliteBackend) -> None:
    from dagq.ports import IndexRow

    for wid, name in [("1", "\U0010ffff"), ("2", "\U0010ffffz"), ("3", "a")]:
        backend.index.create(IndexRow(id=wid, name=name, status="pending"))
    assert [r.id for r in backend.index.query(name_prefix="\U0010ffff")] == ["1", "2"]

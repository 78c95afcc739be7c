"""A receive filter on the embedded queue (``SqliteQueue.only``): what ``dagq run``'s
workers use to take only their own workflows' tasks (issue 31, point 4)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dagq.backends.sqlite import SqliteBackend
from dagq.backends.sqlite.queue import SqliteQueue
from dagq.protocol import names


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[SqliteBackend]:
    b = SqliteBackend(tmp_path / "store.db", max_deliveries=5, dedup_window_s=0.3)
    yield b
    b.close()


def test_a_filtered_receive_takes_only_matching_ids_and_leaves_the_rest_untouched(
        backend: SqliteBackend) -> None:
    q = backend.queues.get("default")
    assert isinstance(q, SqliteQueue)
    for mid in ("mine/a/1", "theirs/b/1", "mine~c~1/d/1", "mine-2/e/1"):
        q.send(mid.encode(), message_id=mid)
    mine = q.only(names.task_id_prefixes("mine"))
    got = mine.receive(10, 30)
    assert sorted(m.id for m in got) == ["mine/a/1", "mine~c~1/d/1"]
    assert mine.receive(10, 30) == []  # the others are never delivered to it
    with sqlite3.connect(backend.path) as conn:
        counts = dict(conn.execute("SELECT msg_id, delivery_count FROM messages").fetchall())
    assert counts["theirs/b/1"] == 0 and counts["mine-2/e/1"] == 0
    mine.delete_many(got)  # acknowledging works as on the whole queue
    assert sorted(m.id for m in q.receive(10, 30)) == ["mine-2/e/1", "theirs/b/1"]


def test_a_filtered_wait_sleeps_instead_of_polling_others_messages(
        backend: SqliteBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    q = backend.queues.get("default")
    assert isinstance(q, SqliteQueue)
    q.send(b"x", message_id="theirs/b/1")  # visible now, but not ours
    mine = q.only(names.task_id_prefixes("mine"))
    calls: list[Any] = []
    real = SqliteQueue._try_receive

    def counted(self: SqliteQueue, *args: Any) -> Any:
        calls.append(args)
        return real(self, *args)

    monkeypatch.setattr(SqliteQueue, "_try_receive", counted)
    start = time.monotonic()
    assert mine.receive(1, 30, wait_s=0.6) == []
    assert time.monotonic() - start >= 0.55
    assert len(calls) == 1  # nothing committed meanwhile: one query, then sleep
    q.send(b"y", message_id="mine/a/1", delay_s=0.3)
    got = mine.receive(1, 30, wait_s=2.0)  # due soon: woken when it becomes visible
    assert [m.id for m in got] == ["mine/a/1"]


def test_prefixes_follow_long_ids_where_message_ids_are_cut() -> None:
    wf = "w" + "x" * 150
    key = f"{wf}/task/1"
    (prefix,) = names.task_id_prefixes(wf)
    assert names.task_message_id(key).startswith(prefix)
    assert names.task_id_prefixes("short") == ("short/", "short~")

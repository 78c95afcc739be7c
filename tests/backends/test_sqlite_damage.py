"""A damaged SQLite file is a store outage: ``StoreUnavailable`` with a hint, from the
statement or the fetch that meets the damage, and long-running processes log a line per
interval instead of a traceback per round."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

from dagq.backends.sqlite import damage
from dagq.backends.sqlite.db import SqliteDb as Db
from dagq.errors import StoreUnavailable
from tests.e2e.harness import Dagq, eventually


def _damage(path: Path) -> None:
    """Overwrite everything after the first page of the file and its WAL."""
    with open(path, "r+b") as f:
        size = path.stat().st_size
        f.seek(4096)
        f.write(os.urandom(max(size - 4096, 65536)))
    wal = path.with_name(path.name + "-wal")
    if wal.exists():
        with open(wal, "r+b") as f:
            f.seek(32)
            f.write(os.urandom(max(wal.stat().st_size - 32, 65536)))


def test_a_damaged_file_is_an_outage_with_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    db = Db(path)
    with db.write() as c:
        c.execute("CREATE TABLE t (a TEXT)")
        c.executemany("INSERT INTO t VALUES (?)", [("x" * 500,) for _ in range(2000)])
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    _damage(path)
    # a connection of the kind the store opens (opening the store would fail already)
    conn = sqlite3.connect(path, factory=damage.Connection)
    conn.store_path = str(path)
    with pytest.raises(StoreUnavailable, match="integrity_check") as info:
        conn.execute("SELECT a FROM t").fetchall()
    assert str(path) in str(info.value)
    conn.close()


def test_statement_errors_stay_what_they_are(tmp_path: Path) -> None:
    db = Db(tmp_path / "x.db")
    with db.write() as c:
        c.execute("CREATE TABLE u (a TEXT PRIMARY KEY)")
        c.execute("INSERT INTO u VALUES ('k')")
    with pytest.raises(sqlite3.IntegrityError):
        db.execute("INSERT INTO u VALUES ('k')")
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        db.execute("SELECT * FROM missing")
    db.close()


@pytest.mark.slow
def test_processes_on_a_damaged_store_log_lines_not_tracebacks(tmp_path: Path) -> None:
    d = Dagq(tmp_path)
    try:
        coordinator, worker = d.coordinator(), d.worker("default", concurrency=1)
        wf = d.submit(d.define("p", [{"name": "a", "kwargs": {"cmd": "sleep 1"}},
                                     {"name": "b", "depends_on": ["a"],
                                      "kwargs": {"cmd": "sleep 1"}}]))
        eventually(lambda: d.tasks(wf)["a"]["status"] == "running", "a to start")
        _damage(tmp_path / "x.db")
        time.sleep(8)
        assert coordinator.popen.poll() is None and worker.popen.poll() is None
        for proc in (coordinator, worker):
            text = proc.text()
            assert "Traceback" not in text, text
            assert len(text.splitlines()) <= 8, text
        assert "integrity_check" in coordinator.text() + worker.text()
    finally:
        d.close()

"""The embedded SQLite backend: every port on one database file.

``SqliteBackend(path)`` is what ``open_backend("sqlite:PATH")`` returns. It is safe to
share between threads (each thread uses its own connection) and between processes
(SQLite's file locks serialise writers; WAL lets readers proceed).
ETags are per-object version numbers rendered as strings; they only grow.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dagq.backends.sqlite.db import SqliteDb, prefix_upper_bound
from dagq.backends.sqlite.index import SqliteIndex
from dagq.backends.sqlite.queue import SqliteQueues
from dagq.errors import AlreadyExists, ConfigError, NotFound, PreconditionFailed

if TYPE_CHECKING:
    from dagq.backends.registry import BackendOptions
from dagq.ports import Index, OutputStore, Queues, Records, RequestStats, StateStore

NEW_ONLY = "*new"
"""``Records.put`` ETag meaning "create only"."""

_LIST_PAGE = 1000
_LIST_FIRST = (
    "SELECT id FROM states WHERE id >= ? AND id < ? "
    f"ORDER BY id LIMIT {_LIST_PAGE}"
)
_LIST_NEXT = _LIST_FIRST.replace("id >= ?", "id > ?")
_READ = (
    "SELECT 0, v.version, s.data FROM states s JOIN state_versions v ON v.id = s.id "
    "WHERE s.id = ?1 "
    "UNION ALL SELECT seq, NULL, data FROM state_journal WHERE id = ?1 ORDER BY 1"
)


def _version(etag: str) -> int:
    """The version an ETag names; -1 (matches nothing) for a malformed ETag."""
    try:
        return int(etag)
    except ValueError:
        return -1


class SqliteStates:
    """``StateStore``: snapshots in table ``states`` with version ETags, appended deltas
    in ``state_journal``."""

    max_journal = 4096
    """Deltas after one snapshot (a read joins them in one query)."""
    delta_tasks = 64
    """An append is one insert, as a replace is one update: a delta saves encoding the
    snapshot (about 0.9 µs per task) on every write."""

    def __init__(self, db: SqliteDb, stats: RequestStats) -> None:
        self._db = db
        self._stats = stats

    def read(self, workflow_id: str) -> tuple[bytes, str]:
        """The state bytes and their ETag; raises ``NotFound``."""
        self._stats.add("state.read")
        rows = self._db.execute(_READ, (workflow_id,)).fetchall()  # one statement: consistent
        if not rows or rows[0][0] != 0:
            raise NotFound(f"no state for workflow {workflow_id!r} in {self._db.path}")
        return b"".join(bytes(r[2]) for r in rows), str(rows[0][1])

    def etag(self, workflow_id: str) -> str:
        """The current ETag (the version row alone); raises ``NotFound``."""
        self._stats.add("state.etag")
        row = self._db.execute("SELECT version FROM state_versions WHERE id = ?",
                               (workflow_id,)).fetchone()
        if row is None:
            raise NotFound(f"no state for workflow {workflow_id!r} in {self._db.path}")
        return str(row[0])

    def create(self, workflow_id: str, data: bytes) -> str:
        """Create the blob only if absent; returns the ETag; raises ``AlreadyExists``."""
        self._stats.add("state.create")
        try:
            with self._db.write() as c:
                c.execute("INSERT INTO states (id, data, version) VALUES (?, ?, 1)",
                          (workflow_id, data))
                c.execute("INSERT OR REPLACE INTO state_versions (id, version) VALUES (?, 1)",
                          (workflow_id,))
                c.execute("DELETE FROM state_journal WHERE id = ?", (workflow_id,))
        except sqlite3.IntegrityError:
            raise AlreadyExists(
                f"a state for workflow {workflow_id!r} already exists in {self._db.path}"
            ) from None
        return "1"

    def replace(self, workflow_id: str, data: bytes, etag: str) -> str:
        """Overwrite (deltas included) only if the current ETag is ``etag``."""
        self._stats.add("state.replace")
        with self._db.write() as c:
            version = self._bump(c, workflow_id, etag, data)
            c.execute("DELETE FROM state_journal WHERE id = ?", (workflow_id,))
        return version

    def append(self, workflow_id: str, data: bytes, etag: str) -> str:
        """Add a delta only if the current ETag is ``etag``; returns the new ETag."""
        self._stats.add("state.append")
        with self._db.write() as c:
            version = self._bump(c, workflow_id, etag, None)
            c.execute("INSERT INTO state_journal (id, seq, data) VALUES (?, ?, ?)",
                      (workflow_id, int(version), data))
        return version

    def _bump(self, c: sqlite3.Connection, workflow_id: str, etag: str,
              data: bytes | None) -> str:
        """Inside a write transaction: advance the version if it is ``etag`` (and set the
        snapshot to ``data`` unless ``None``), or raise. The version has its own small
        row, so a delta never rewrites the snapshot's row."""
        rows = c.execute(
            "UPDATE state_versions SET version = version + 1 WHERE id = ? AND version = ? "
            "RETURNING version", (workflow_id, _version(etag)),
        ).fetchall()
        if rows:
            if data is not None:
                c.execute("UPDATE states SET data = ? WHERE id = ?", (data, workflow_id))
            return str(rows[0][0])
        current = c.execute("SELECT version FROM state_versions WHERE id = ?",
                            (workflow_id,)).fetchone()
        if current is None:
            raise NotFound(f"no state for workflow {workflow_id!r} in {self._db.path}")
        raise PreconditionFailed(
            f"state of workflow {workflow_id!r} changed (ETag {current[0]}, expected {etag})"
        )

    def list_ids(self, prefix: str = "") -> Iterator[str]:
        """Ids of all stored workflows starting with ``prefix``, in id order."""
        self._stats.add("state.list")
        upper = prefix_upper_bound(prefix)
        sql, bound = _LIST_FIRST, prefix
        while True:  # pages, so no read transaction stays open while the caller iterates
            page = self._db.execute(sql, (bound, upper)).fetchall()
            yield from (r[0] for r in page)
            if len(page) < _LIST_PAGE:
                return
            sql, bound = _LIST_NEXT, page[-1][0]


    def delete(self, workflow_id: str) -> None:
        """Remove a workflow's state (no error when absent)."""
        self._stats.add("state.delete")
        with self._db.write() as c:
            c.execute("DELETE FROM states WHERE id = ?", (workflow_id,))
            c.execute("DELETE FROM state_versions WHERE id = ?", (workflow_id,))
            c.execute("DELETE FROM state_journal WHERE id = ?", (workflow_id,))


class SqliteOutputs:
    """``OutputStore``: named bytes with their MD5 in table ``outputs``."""

    def __init__(self, db: SqliteDb, stats: RequestStats) -> None:
        self._db = db
        self._stats = stats

    def put(self, name: str, data: bytes) -> str:
        """Store ``data`` under ``name`` (overwrite); returns its hex MD5."""
        self._stats.add("output.put")
        md5 = hashlib.md5(data, usedforsecurity=False).hexdigest()
        self._db.execute(
            "INSERT OR REPLACE INTO outputs (name, data, size, md5, updated_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (name, data, len(data), md5, time.time()),
        )
        return md5

    def get(self, name: str) -> bytes:
        """The stored bytes; raises ``NotFound``."""
        self._stats.add("output.get")
        row = self._db.execute(
            "SELECT data FROM outputs WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            raise NotFound(f"no stored object named {name!r} in {self._db.path}")
        return bytes(row[0])

    def list(self, prefix: str) -> list[tuple[str, int, str]]:
        """``(name, size, md5)`` of every object whose name starts with ``prefix``."""
        self._stats.add("output.list")
        upper = prefix_upper_bound(prefix)
        rows = self._db.execute(
            "SELECT name, size, md5 FROM outputs WHERE name >= ? AND name < ? "
            "ORDER BY name",
            (prefix, upper),
        ).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]


    def delete(self, name: str) -> None:
        """Remove an object (no error when absent)."""
        self._stats.add("output.delete")
        self._db.execute("DELETE FROM outputs WHERE name = ?", (name,))


class SqliteRecords:
    """``Records``: small JSON records with version ETags in table ``records``."""

    def __init__(self, db: SqliteDb, stats: RequestStats) -> None:
        self._db = db
        self._stats = stats

    def get(self, partition: str, key: str) -> tuple[dict[str, Any], str]:
        """The record and its ETag; raises ``NotFound``."""
        self._stats.add("record.get")
        row = self._db.execute(
            "SELECT value, version FROM records WHERE partition = ? AND key = ?",
            (partition, key),
        ).fetchone()
        if row is None:
            raise NotFound(f"no record {partition}/{key} in {self._db.path}")
        return json.loads(row[0]), str(row[1])

    def put(self, partition: str, key: str, value: Mapping[str, Any],
            etag: str | None = None) -> str:
        """Upsert; with ``etag`` only if it matches; ``"*new"`` creates only."""
        self._stats.add("record.put")
        text = json.dumps(dict(value), separators=(",", ":"))
        if etag is None:
            row = self._db.execute(
                "INSERT INTO records (partition, key, value, version) VALUES (?, ?, ?, 1) "
                "ON CONFLICT (partition, key) DO UPDATE SET value = excluded.value, "
                "version = version + 1 RETURNING version",
                (partition, key, text),
            ).fetchall()[0]
            return str(row[0])
        if etag == NEW_ONLY:
            try:
                self._db.execute(
                    "INSERT INTO records (partition, key, value, version) VALUES (?, ?, ?, 1)",
                    (partition, key, text),
                )
            except sqlite3.IntegrityError:
                raise AlreadyExists(f"record {partition}/{key} already exists") from None
            return "1"
        rows = self._db.execute(
            "UPDATE records SET value = ?, version = version + 1 "
            "WHERE partition = ? AND key = ? AND version = ? RETURNING version",
            (text, partition, key, _version(etag)),
        ).fetchall()
        if not rows:
            raise PreconditionFailed(
                f"record {partition}/{key} is absent or changed since ETag {etag}"
            )
        return str(rows[0][0])

    def put_many(self, partition: str,
                 items: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Upsert several records of one partition in one transaction."""
        if not items:
            return
        self._stats.add("record.put_many")
        rows = [(partition, key, json.dumps(dict(value), separators=(",", ":")))
                for key, value in items]
        with self._db.write() as conn:
            conn.executemany(
                "INSERT INTO records (partition, key, value, version) VALUES (?, ?, ?, 1) "
                "ON CONFLICT (partition, key) DO UPDATE SET value = excluded.value, "
                "version = version + 1", rows)

    def delete(self, partition: str, key: str) -> None:
        """Remove a record (no error when absent)."""
        self._stats.add("record.delete")
        self._db.execute(
            "DELETE FROM records WHERE partition = ? AND key = ?", (partition, key)
        )

    def list(self, partition: str, prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
        """``(key, record)`` pairs of a partition whose key starts with ``prefix``."""
        self._stats.add("record.list")
        upper = prefix_upper_bound(prefix)
        rows = self._db.execute(
            "SELECT key, value FROM records WHERE partition = ? AND key >= ? "
            "AND key < ? ORDER BY key",
            (partition, prefix, upper),
        ).fetchall()
        return [(r[0], json.loads(r[1])) for r in rows]


class SqliteBackend:
    """Every port on one SQLite file (created with its parent directories if absent).

    ``max_deliveries``: deliveries after which a message is dead-lettered.
    ``busy_timeout_s``: how long a writer waits for another process's transaction.
    ``dedup_window_s``: how long a deleted message's id still drops re-sends.
    ``poll_interval_s``: how often a waiting ``receive`` checks for commits.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_deliveries: int = 10,
        busy_timeout_s: float = 30.0,
        dedup_window_s: float = 600.0,
        poll_interval_s: float = 0.001,
    ) -> None:
        self.stats = RequestStats()
        self._db = SqliteDb(path, busy_timeout_s=busy_timeout_s)
        self.path = self._db.path
        self.states: StateStore = SqliteStates(self._db, self.stats)
        self.index: Index = SqliteIndex(self._db, self.stats)
        self.outputs: OutputStore = SqliteOutputs(self._db, self.stats)
        self.records: Records = SqliteRecords(self._db, self.stats)
        self._sqlite_queues = SqliteQueues(
            self._db, self.stats, max_deliveries=max_deliveries,
            dedup_window_s=dedup_window_s, poll_interval_s=poll_interval_s,
        )
        self.queues: Queues = self._sqlite_queues

    def close(self) -> None:
        """Close every connection of this backend."""
        self._sqlite_queues.close()
        self._db.close()

    def __repr__(self) -> str:
        return f"SqliteBackend({str(self.path)!r})"


def sqlite_path(store_url: str) -> str:
    """The file path of a ``sqlite:`` store URL; raises ``ConfigError`` if it has none."""
    rest = store_url[len("sqlite:"):]
    path = rest[2:] if rest.startswith("//") else rest
    if not path or path == ":memory:":
        raise ConfigError(
            f"DAGQ_STORE={store_url!r} names no database file; give a path, e.g. "
            "DAGQ_STORE=sqlite:.dagq/dagq.db")
    return path


def open_sqlite_backend(store_url: str, options: BackendOptions) -> SqliteBackend:
    """The registry's opener for ``sqlite:PATH`` (``sqlite:///abs/path`` also works)."""
    return SqliteBackend(sqlite_path(store_url), max_deliveries=options.max_deliveries)

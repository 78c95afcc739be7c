"""Connections, transactions and schema of the embedded SQLite store.

One database file holds every port's tables. Each thread (and each process after a
fork) gets its own connection; WAL mode lets readers run while one writer commits, and
multi-statement writes start with ``BEGIN IMMEDIATE`` so two writers never deadlock
while upgrading a read lock. Single-statement writes run in autocommit mode: SQLite
takes the write lock at the start of such a statement, so they are atomic on their own.
A statement that finds the file locked is retried after pauses of 0.1 ms growing to
4 ms, for up to ``busy_timeout_s``.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dagq.backends.sqlite import damage
from dagq.errors import StoreUnavailable

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # version 1
        """CREATE TABLE IF NOT EXISTS states (
            id TEXT PRIMARY KEY, data BLOB NOT NULL, version INTEGER NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS workflows (
            id TEXT PRIMARY KEY, name TEXT NOT NULL, status TEXT NOT NULL,
            counts TEXT NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL,
            cancel_requested INTEGER NOT NULL DEFAULT 0, parent_id TEXT, parent_task TEXT,
            definition_hash TEXT NOT NULL DEFAULT '', extra TEXT NOT NULL DEFAULT '{}')""",
        "CREATE INDEX IF NOT EXISTS workflows_status ON workflows(status, id)",
        "CREATE INDEX IF NOT EXISTS workflows_name ON workflows(name, id)",
        "CREATE INDEX IF NOT EXISTS workflows_cancel ON workflows(id) WHERE cancel_requested",
        """CREATE TABLE IF NOT EXISTS queues (
            name TEXT PRIMARY KEY, created_at REAL NOT NULL)""",
        # lock: random token renewed on every receive/extend/release; receipts embed it.
        """CREATE TABLE IF NOT EXISTS messages (
            seq INTEGER PRIMARY KEY, queue TEXT NOT NULL, msg_id TEXT, body BLOB NOT NULL,
            visible_at REAL NOT NULL, enqueued_at REAL NOT NULL,
            delivery_count INTEGER NOT NULL DEFAULT 0, lock INTEGER NOT NULL DEFAULT 0)""",
        "CREATE UNIQUE INDEX IF NOT EXISTS messages_id ON messages(queue, msg_id)",
        "CREATE INDEX IF NOT EXISTS messages_visible ON messages(queue, visible_at)",
        # Ids of removed messages, so a re-sent id is dropped within the dedup window.
        """CREATE TABLE IF NOT EXISTS tombstones (
            queue TEXT NOT NULL, msg_id TEXT NOT NULL, deleted_at REAL NOT NULL,
            PRIMARY KEY (queue, msg_id)) WITHOUT ROWID""",
        "CREATE INDEX IF NOT EXISTS tombstones_age ON tombstones(deleted_at)",
        """CREATE TRIGGER IF NOT EXISTS messages_tombstone AFTER DELETE ON messages
            WHEN old.msg_id IS NOT NULL BEGIN
            INSERT OR REPLACE INTO tombstones(queue, msg_id, deleted_at)
            VALUES (old.queue, old.msg_id, (julianday('now') - 2440587.5) * 86400.0);
            END""",
        """CREATE TABLE IF NOT EXISTS dead_letters (
            seq INTEGER PRIMARY KEY, queue TEXT NOT NULL, msg_id TEXT, body BLOB NOT NULL,
            enqueued_at REAL NOT NULL, delivery_count INTEGER NOT NULL,
            reason TEXT NOT NULL, dead_at REAL NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS dead_letters_queue ON dead_letters(queue, seq)",
        """CREATE TABLE IF NOT EXISTS outputs (
            name TEXT PRIMARY KEY, data BLOB NOT NULL, size INTEGER NOT NULL,
            md5 TEXT NOT NULL, updated_at REAL NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS records (
            partition TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
            version INTEGER NOT NULL, PRIMARY KEY (partition, key)) WITHOUT ROWID""",
    ),
    (  # version 2: deltas appended to a state since its snapshot (engine.journal)
        """CREATE TABLE IF NOT EXISTS state_journal (
            id TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL,
            PRIMARY KEY (id, seq)) WITHOUT ROWID""",
    ),
    (  # version 3: each state's version in a row of its own. SQLite rewrites a whole row
        # (a large blob's overflow pages included) on any UPDATE of it, so bumping the
        # version next to the snapshot cost the snapshot's size on every write.
        """CREATE TABLE IF NOT EXISTS state_versions (
            id TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID""",
        "INSERT OR IGNORE INTO state_versions (id, version) SELECT id, version FROM states",
    ),
)
"""Schema as data: entry ``i`` upgrades a file from ``PRAGMA user_version`` i to i + 1.
Statements are idempotent, so a half-applied upgrade is simply applied again."""

SCHEMA_VERSION = len(MIGRATIONS)

_CHECKPOINT_PAGES = 10_000
_WAL_SIZE_LIMIT = 64 * 1024 * 1024

_fork_generation = 0
_live: weakref.WeakSet[_Holder] = weakref.WeakSet()
_inherited: list[sqlite3.Connection] = []


def _after_fork() -> None:
    """In a forked child: never use, close or free the parent's connections.

    Closing one would let SQLite act on locks only the parent holds (it could even
    checkpoint and remove the WAL under the parent), so they are kept alive, unused.
    """
    global _fork_generation
    _fork_generation += 1
    _inherited.extend(h.conn for h in list(_live))


os.register_at_fork(after_in_child=_after_fork)


class _Holder:
    """Owns one thread's connection; closes it when the thread's locals are dropped."""

    __slots__ = ("__weakref__", "conn", "generation")

    def __init__(self, conn: sqlite3.Connection, generation: int) -> None:
        self.conn = conn
        self.generation = generation

    def __del__(self) -> None:
        if self.generation == _fork_generation:
            self.conn.close()


class SqliteDb:
    """Thread-local connections to one database file, plus transaction helpers."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._holders: weakref.WeakSet[_Holder] = weakref.WeakSet()
        self._closed = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreUnavailable(
                f"cannot create the directory of the SQLite store {self.path}: {e}"
            ) from e
        self._migrate(self.conn())

    def conn(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use, and again after a fork)."""
        holder: _Holder | None = getattr(self._local, "holder", None)
        if holder is not None and holder.generation == _fork_generation:
            return holder.conn
        if self._closed:
            raise StoreUnavailable(f"the SQLite store {self.path} was closed")
        conn = self._connect()
        holder = _Holder(conn, _fork_generation)
        self._local.holder = holder
        self._holders.add(holder)
        _live.add(holder)
        return conn

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout_s, isolation_level=None,
                check_same_thread=False, cached_statements=256, factory=damage.Connection,
            )
            conn.store_path = str(self.path)
            # SQLite's own busy handler sleeps 1, 2, 5, 10, ... ms; _retry waits far less.
            conn.execute("PRAGMA busy_timeout = 0")
            # A new file's switch to WAL needs the file to itself, and SQLite answers
            # "locked" at once, without waiting, while another process's first write
            # transaction holds it: wait for that, as for any locked statement.
            self._busy_retrying(conn, "PRAGMA journal_mode = WAL")
            # With WAL, NORMAL survives process crashes; only an OS crash may lose the
            # last commits. Every dagq writer can recover from that through the outbox.
            conn.execute("PRAGMA synchronous = NORMAL")
            # Checkpoints fsync twice; doing them every ~40 MB of WAL instead of ~4 MB
            # keeps that cost off most commits.
            conn.execute(f"PRAGMA wal_autocheckpoint = {_CHECKPOINT_PAGES}")
            conn.execute(f"PRAGMA journal_size_limit = {_WAL_SIZE_LIMIT}")
        except sqlite3.Error as e:
            raise StoreUnavailable(
                f"cannot open the SQLite store {self.path}: {e} "
                "(check DAGQ_STORE and that the file is a dagq store)"
            ) from e
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = self._user_version(conn)
        if version == SCHEMA_VERSION:
            return
        if version > SCHEMA_VERSION:
            raise StoreUnavailable(
                f"the SQLite store {self.path} has schema version {version}, newer than "
                f"this dagq understands ({SCHEMA_VERSION}); upgrade dagq"
            )
        with self.write() as c:
            version = self._user_version(c)
            for statements in MIGRATIONS[version:]:
                for ddl in statements:
                    c.execute(ddl)
            c.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _busy_retrying(self, conn: sqlite3.Connection, sql: str) -> None:
        try:
            conn.execute(sql)
        except sqlite3.OperationalError as e:
            if e.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                raise
            self._retry(conn, sql, ())

    def _user_version(self, conn: sqlite3.Connection) -> int:
        try:
            try:
                row = conn.execute("PRAGMA user_version").fetchone()
            except sqlite3.OperationalError as e:
                # busy while another process recovers the WAL of a killed writer
                if e.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                    raise
                row = self._retry(conn, "PRAGMA user_version", ()).fetchone()
        except sqlite3.DatabaseError as e:
            raise StoreUnavailable(f"{self.path} is not a usable SQLite store: {e}") from e
        return int(row[0])

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        """Run one statement on this thread's connection, waiting while the file is
        locked by another writer. A single write statement is its own transaction."""
        conn = self.conn()
        try:
            return conn.execute(sql, params)
        except sqlite3.OperationalError as e:
            if e.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                raise
        return self._retry(conn, sql, params)

    def _retry(self, conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> sqlite3.Cursor:
        """Retry a statement that met SQLITE_BUSY with short, growing, jittered pauses."""
        deadline = time.monotonic() + self.busy_timeout_s
        pause = 0.0001
        while True:
            time.sleep(pause * (0.5 + random.random()))
            try:
                return conn.execute(sql, params)
            except sqlite3.OperationalError as e:
                if e.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                    raise
                if time.monotonic() > deadline:
                    raise StoreUnavailable(
                        f"the SQLite store {self.path} stayed locked for "
                        f"{self.busy_timeout_s:g} s; another process may hold a long "
                        "transaction"
                    ) from e
            pause = min(pause * 2, 0.004)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back on error."""
        conn = self.conn()
        self.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        """Close every connection this object opened (in any thread)."""
        self._closed = True
        for holder in list(self._holders):
            if holder.generation == _fork_generation:
                holder.conn.close()
        self._holders = weakref.WeakSet()
        self._local = threading.local()


ABOVE_ALL_TEXT = b"\xff"
"""SQLite orders every BLOB after every TEXT value: an upper bound for "no upper bound"."""


def prefix_upper_bound(prefix: str) -> str | bytes:
    """The smallest value greater than every string starting with ``prefix``.

    SQLite compares TEXT as UTF-8 bytes, which orders like code points, so
    ``prefix <= x < upper`` is an index range scan equivalent to ``x.startswith(prefix)``.
    """
    chars = list(prefix)
    while chars:
        code = ord(chars.pop()) + 1
        if code == 0xD800:  # surrogates cannot be stored; skip past them
            code = 0xE000
        if code <= 0x10FFFF:
            return "".join(chars) + chr(code)
    return ABOVE_ALL_TEXT

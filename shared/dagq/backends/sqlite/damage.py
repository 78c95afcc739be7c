"""A damaged or unreachable SQLite file is an outage of the store, not a bug.

SQLite reports a file that was overwritten, truncated or is not a database at all
(``SQLITE_CORRUPT``, ``SQLITE_NOTADB``), a failing disk (``SQLITE_IOERR``), a full one
(``SQLITE_FULL``) and a file that vanished (``SQLITE_CANTOPEN``) as plain
``sqlite3.DatabaseError``s, raised by whichever statement or fetch first meets the damage.
Left as they are they read like programming errors: the coordinator would fail the
workflow it was working on, and a worker slot would die with a traceback per round.
Connections made with :class:`Connection` raise :class:`~dagq.errors.StoreUnavailable`
for them instead, with a message that says where to look, so every long-running loop
backs off, logs one line, and carries on once the file is restored.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any, NoReturn

from dagq.errors import StoreUnavailable

OUTAGE_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_IOERR,
                          sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN})
"""Primary result codes that mean the file, not the statement, is at fault."""


def is_outage(exc: sqlite3.Error) -> bool:
    """True when ``exc`` is about the database file rather than the statement."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in OUTAGE_CODES


def raise_outage(exc: sqlite3.Error, path: str) -> NoReturn:
    """Raise ``StoreUnavailable`` for ``exc`` (an outage error, see ``is_outage``)."""
    code = int(getattr(exc, "sqlite_errorcode", 0)) & 0xFF
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        hint = (f"the file is damaged: stop dagq, check it with `sqlite3 {path} "
                "'PRAGMA integrity_check'` and restore it from a backup")
    elif code == sqlite3.SQLITE_FULL:
        hint = f"the disk holding {path} is full: free space"
    else:
        hint = f"check that {path} and its -wal and -shm files exist and can be written"
    raise StoreUnavailable(f"the SQLite store {path} cannot be used ({exc}); {hint}") from exc


class Cursor(sqlite3.Cursor):
    """A cursor whose outage errors are ``StoreUnavailable``."""

    def _fail(self, exc: sqlite3.Error) -> NoReturn:
        if not is_outage(exc):
            raise exc
        raise_outage(exc, getattr(self.connection, "store_path", "?"))

    def execute(self, sql: str, parameters: Any = (), /) -> Cursor:
        try:
            super().execute(sql, parameters)
        except sqlite3.DatabaseError as exc:
            self._fail(exc)
        return self

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> Cursor:
        try:
            super().executemany(sql, seq_of_parameters)
        except sqlite3.DatabaseError as exc:
            self._fail(exc)
        return self

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite3.DatabaseError as exc:
            self._fail(exc)

    def fetchmany(self, size: int | None = 1) -> list[Any]:
        try:
            return super().fetchmany(size if size is not None else self.arraysize)
        except sqlite3.DatabaseError as exc:
            self._fail(exc)

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite3.DatabaseError as exc:
            self._fail(exc)

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except sqlite3.DatabaseError as exc:
            self._fail(exc)


class Connection(sqlite3.Connection):
    """A connection whose cursors (``execute`` included) are :class:`Cursor`\\ s."""

    store_path: str = "?"
    """The file, for messages."""

    def cursor(self, factory: Any = Cursor) -> Any:
        """A new :class:`Cursor` (or one of ``factory``)."""
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = (), /) -> Cursor:
        """``sqlite3.Connection.execute`` on a :class:`Cursor`."""
        return Cursor(self).execute(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> Cursor:
        """``sqlite3.Connection.executemany`` on a :class:`Cursor`."""
        return Cursor(self).executemany(sql, seq_of_parameters)

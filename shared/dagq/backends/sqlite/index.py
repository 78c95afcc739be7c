"""``Index`` on SQLite: the ``workflows`` table (listing rows and cancel flags)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from dagq.backends.sqlite.db import SqliteDb, prefix_upper_bound
from dagq.errors import AlreadyExists, NotFound
from dagq.ports import IndexRow, RequestStats

_COLUMNS = (
    "id, name, status, counts, created_at, updated_at, cancel_requested, "
    "parent_id, parent_task, definition_hash, extra"
)


def _row(r: tuple[Any, ...]) -> IndexRow:
    return IndexRow(
        id=r[0], name=r[1], status=r[2], counts=json.loads(r[3]), created_at=r[4],
        updated_at=r[5], cancel_requested=bool(r[6]), parent_id=r[7], parent_task=r[8],
        definition_hash=r[9], extra=json.loads(r[10]),
    )


def _dumps(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), separators=(",", ":"))


class SqliteIndex:
    """Workflow listing rows. ``update_progress`` writes only status, counts and time,
    so a concurrent ``request_cancel`` is never overwritten."""

    def __init__(self, db: SqliteDb, stats: RequestStats) -> None:
        self._db = db
        self._stats = stats

    def create(self, row: IndexRow) -> None:
        """Insert a new row; raises ``AlreadyExists``."""
        self._stats.add("index.create")
        try:
            self._db.execute(
                f"INSERT INTO workflows ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (row.id, row.name, row.status, _dumps(row.counts), row.created_at,
                 row.updated_at, int(row.cancel_requested), row.parent_id, row.parent_task,
                 row.definition_hash, _dumps(row.extra)),
            )
        except sqlite3.IntegrityError:
            raise AlreadyExists(f"workflow {row.id!r} is already in the index") from None

    def get(self, workflow_id: str) -> IndexRow:
        """The row; raises ``NotFound``."""
        self._stats.add("index.get")
        r = self._db.execute(
            f"SELECT {_COLUMNS} FROM workflows WHERE id = ?", (workflow_id,)
        ).fetchone()
        if r is None:
            raise NotFound(f"workflow {workflow_id!r} is not in the index of {self._db.path}")
        return _row(r)

    def update_progress(
        self, workflow_id: str, *, status: str, counts: Mapping[str, int], updated_at: float
    ) -> None:
        """Update status, counts and time only; raises ``NotFound`` if there is no row."""
        self._stats.add("index.update")
        cur = self._db.execute(
            "UPDATE workflows SET status = ?, counts = ?, updated_at = ? WHERE id = ?",
            (status, _dumps(counts), updated_at, workflow_id),
        )
        if cur.rowcount == 0:
            raise NotFound(f"workflow {workflow_id!r} is not in the index of {self._db.path}")

    def request_cancel(self, workflow_id: str, requested: bool = True) -> None:
        """Set (or clear) ``cancel_requested``; raises ``NotFound``."""
        self._stats.add("index.cancel")
        cur = self._db.execute(
            "UPDATE workflows SET cancel_requested = ? WHERE id = ?",
            (1 if requested else 0, workflow_id),
        )
        if cur.rowcount == 0:
            raise NotFound(f"workflow {workflow_id!r} is not in the index of {self._db.path}")

    def query(
        self,
        *,
        status: str | None = None,
        name_prefix: str | None = None,
        cancel_requested: bool | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> list[IndexRow]:
        """Rows matching every given filter, ordered by id, starting after id ``after``."""
        self._stats.add("index.query")
        where: list[str] = []
        params: list[Any] = []
        if status is not None:
            where.append("status = ?")
            params.append(status)
        if name_prefix:
            where.append("name >= ? AND name < ?")
            params += [name_prefix, prefix_upper_bound(name_prefix)]
        if cancel_requested is not None:
            where.append("cancel_requested" if cancel_requested else "NOT cancel_requested")
        if after is not None:
            where.append("id > ?")
            params.append(after)
        sql = f"SELECT {_COLUMNS} FROM workflows"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [_row(r) for r in self._db.execute(sql, params).fetchall()]

    def delete(self, workflow_id: str) -> None:
        """Remove a workflow's row (no error when absent)."""
        self._stats.add("index.delete")
        self._db.execute("DELETE FROM workflows WHERE id = ?", (workflow_id,))

"""Listing workflows: which index rows match a filter, in which order, page by page.

Both clients list through here: ``WorkflowClient.list_workflows`` in-process, and the
HTTP handler of ``GET /workflows``, which the remote client pages through without
filtering or sorting anything again. Two orders exist: by id (the index's own order,
cheap: a page reads about one page of rows) and newest first (every row with the asked
status is read and sorted, as a newest-first listing of an id-ordered index must).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dagq.ports import Index, IndexRow

ORDERS = ("id", "newest")
"""The orders a listing can have."""
_READ = 500
"""Rows read per index query of an id-ordered listing with filters the index lacks."""


@dataclass(frozen=True)
class WorkflowFilter:
    """Which workflows a listing shows."""

    status: str | None = None
    """Only those with this status."""
    since: float | None = None
    """Only those created at or after this time (epoch seconds)."""
    name: str | None = None
    """Only those whose name contains this (case-insensitively)."""

    def matches(self, row: IndexRow) -> bool:
        """True if ``row`` passes every filter given."""
        return ((self.status is None or row.status == self.status)
                and (self.since is None or row.created_at >= self.since)
                and (self.name is None or self.name.lower() in row.name.lower()))


@dataclass
class WorkflowPage:
    """One page of a listing."""

    rows: list[IndexRow]
    """The rows, in the listing's order."""
    next: str | None
    """The ``after`` that reads the next page; None on the last."""


def list_page(index: Index, where: WorkflowFilter, *, order: str = "id",
              limit: int | None = None, after: str | None = None) -> WorkflowPage:
    """The rows matching ``where`` in ``order``, after cursor ``after`` (a page's
    ``next``), at most ``limit`` (None: all). ``ValueError`` for a cursor that is not one."""
    if order == "newest":
        return _newest(index, where, limit, after)
    matched: list[IndexRow] = []
    cursor = after
    while limit is None or len(matched) <= limit:
        want = None if limit is None else max(_READ, limit + 1 - len(matched))
        rows = index.query(status=where.status, limit=want, after=cursor)
        matched += [r for r in rows if where.matches(r)]
        if want is None or len(rows) < want:
            break
        cursor = rows[-1].id
    return _page(matched, limit, lambda r: r.id)


def _newest(index: Index, where: WorkflowFilter, limit: int | None,
            after: str | None) -> WorkflowPage:
    rows = [r for r in index.query(status=where.status) if where.matches(r)]
    rows.sort(key=lambda r: (r.created_at, r.id), reverse=True)
    if after is not None:
        when, sep, last = after.partition(":")
        try:
            key = (float(when), last)
        except ValueError:
            key = None
        if key is None or not sep:
            raise ValueError(f"after={after!r} is not the next of a newest-first page "
                            "(it looks like CREATED_AT:ID); list again from the start")
        rows = [r for r in rows if (r.created_at, r.id) < key]
    return _page(rows, limit, lambda r: f"{r.created_at!r}:{r.id}")


def _page(rows: list[IndexRow], limit: int | None, cursor: Any) -> WorkflowPage:
    if limit is None or len(rows) <= limit:
        return WorkflowPage(rows, None)
    page = rows[:limit]
    return WorkflowPage(page, cursor(page[-1]))


def row_summary(row: IndexRow) -> dict[str, Any]:
    """A JSON-ready summary of an index row."""
    out: dict[str, Any] = {
        "id": row.id, "name": row.name, "status": row.status, "counts": dict(row.counts),
        "created_at": row.created_at, "updated_at": row.updated_at,
        "cancel_requested": row.cancel_requested,
    }
    if row.parent_id:
        out["parent_id"] = row.parent_id
        out["parent_task"] = row.parent_task
    if row.extra:
        out["extra"] = row.extra
    return out

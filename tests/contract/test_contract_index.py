"""Contract: Index (workflow rows, progress updates, cancel flags, queries)."""

from __future__ import annotations

import threading

import pytest

from dagq.errors import AlreadyExists, NotFound
from dagq.ports import Backend, IndexRow


def _row(wid: str, name: str = "etl", status: str = "pending", **kw: object) -> IndexRow:
    return IndexRow(id=wid, name=name, status=status, created_at=1000.0, updated_at=1000.0,
                    **kw)  # type: ignore[arg-type]


def test_create_and_get_round_trip_every_field(backend: Backend) -> None:
    row = IndexRow(
        id="wf-1", name="etl", status="running", counts={"running": 2, "pending": 3},
        created_at=1700000000.25, updated_at=1700000001.5, cancel_requested=False,
        parent_id="parent", parent_task="child-task", definition_hash="abc123",
        extra={"schedule": "nightly", "fire_time": 1700000000.0},
    )
    backend.index.create(row)
    assert backend.index.get("wf-1") == row


def test_create_twice_raises_already_exists(backend: Backend) -> None:
    backend.index.create(_row("wf-1"))
    with pytest.raises(AlreadyExists):
        backend.index.create(_row("wf-1", name="other"))
    assert backend.index.get("wf-1").name == "etl"


def test_missing_rows_raise_not_found(backend: Backend) -> None:
    with pytest.raises(NotFound):
        backend.index.get("nope")
    with pytest.raises(NotFound):
        backend.index.request_cancel("nope")
    with pytest.raises(NotFound):
        backend.index.update_progress("nope", status="running", counts={}, updated_at=1.0)


def test_update_progress_changes_only_status_counts_and_time(backend: Backend) -> None:
    backend.index.create(_row("wf-1", parent_id="p", definition_hash="h", extra={"k": 1}))
    backend.index.update_progress(
        "wf-1", status="running", counts={"running": 1, "completed": 4}, updated_at=2000.0
    )
    row = backend.index.get("wf-1")
    assert (row.status, row.counts, row.updated_at) == (
        "running", {"running": 1, "completed": 4}, 2000.0)
    assert (row.name, row.created_at, row.parent_id, row.definition_hash, row.extra) == (
        "etl", 1000.0, "p", "h", {"k": 1})


def test_update_progress_never_clears_a_cancel_request(backend: Backend) -> None:
    backend.index.create(_row("wf-1"))
    backend.index.request_cancel("wf-1")
    backend.index.update_progress("wf-1", status="running", counts={}, updated_at=2.0)
    assert backend.index.get("wf-1").cancel_requested
    backend.index.request_cancel("wf-1")  # idempotent
    assert backend.index.get("wf-1").cancel_requested


def test_cancel_is_not_lost_under_concurrent_progress_updates(
    backend: Backend, other: Backend
) -> None:
    backend.index.create(_row("wf-1"))
    halfway = threading.Event()

    def progress() -> None:
        for i in range(60):
            backend.index.update_progress(
                "wf-1", status="running", counts={"completed": i}, updated_at=float(i)
            )
            if i == 20:
                halfway.set()

    writer = threading.Thread(target=progress)
    writer.start()
    assert halfway.wait(60)
    other.index.request_cancel("wf-1")
    writer.join()
    row = backend.index.get("wf-1")
    assert row.cancel_requested
    assert row.counts == {"completed": 59}


@pytest.fixture
def populated(backend: Backend) -> Backend:
    rows = [
        _row("w01", name="etl", status="running"),
        _row("w02", name="etl-daily", status="completed"),
        _row("w03", name="et", status="running"),
        _row("w04", name="etm", status="failed"),
        _row("w05", name="etl-daily", status="running"),
        _row("w06", name="report", status="running"),
        _row("w07", name="etl.x", status="pending"),
    ]
    for r in reversed(rows):
        backend.index.create(r)
    backend.index.request_cancel("w05")
    backend.index.request_cancel("w06")
    return backend


def _ids(rows: list[IndexRow]) -> list[str]:
    return [r.id for r in rows]


def test_query_without_filters_returns_every_row_ordered_by_id(populated: Backend) -> None:
    assert _ids(populated.index.query()) == [f"w0{i}" for i in range(1, 8)]


def test_query_filters_by_status(populated: Backend) -> None:
    assert _ids(populated.index.query(status="running")) == ["w01", "w03", "w05", "w06"]
    assert _ids(populated.index.query(status="cancelled")) == []


def test_query_filters_by_name_prefix(populated: Backend) -> None:
    assert _ids(populated.index.query(name_prefix="etl")) == ["w01", "w02", "w05", "w07"]
    assert _ids(populated.index.query(name_prefix="etl-")) == ["w02", "w05"]
    assert _ids(populated.index.query(name_prefix="et")) == ["w01", "w02", "w03", "w04",
                                                             "w05", "w07"]
    assert _ids(populated.index.query(name_prefix="zz")) == []


def test_query_filters_by_cancel_flag(populated: Backend) -> None:
    assert _ids(populated.index.query(cancel_requested=True)) == ["w05", "w06"]
    assert _ids(populated.index.query(cancel_requested=False)) == ["w01", "w02", "w03",
                                                                   "w04", "w07"]


def test_query_combines_filters(populated: Backend) -> None:
    assert _ids(populated.index.query(status="running", name_prefix="etl")) == ["w01", "w05"]
    assert _ids(populated.index.query(status="running", cancel_requested=True,
                                      name_prefix="etl")) == ["w05"]


def test_query_pages_with_limit_and_after(populated: Backend) -> None:
    assert _ids(populated.index.query(limit=3)) == ["w01", "w02", "w03"]
    assert _ids(populated.index.query(limit=3, after="w03")) == ["w04", "w05", "w06"]
    assert _ids(populated.index.query(after="w06")) == ["w07"]
    assert _ids(populated.index.query(after="w07")) == []
    seen: list[str] = []
    after = None
    while page := populated.index.query(status="running", limit=2, after=after):
        seen += _ids(page)
        after = page[-1].id
    assert seen == ["w01", "w03", "w05", "w06"]


def test_delete_removes_a_row_and_is_idempotent(backend: Backend) -> None:
    backend.index.create(_row("gone-1"))
    backend.index.create(_row("kept-1"))
    for wid in ("gone-1", "gone-1", "never-was"):  # twice, and one that never existed
        backend.index.delete(wid)
    with pytest.raises(NotFound):
        backend.index.get("gone-1")
    assert [r.id for r in backend.index.query()] == ["kept-1"]

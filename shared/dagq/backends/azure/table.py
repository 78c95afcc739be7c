"""The workflow index and small records on Table Storage.

Index rows live in one partition (``wf``) keyed by workflow id, so listings come back in
id order and page with ``RowKey gt`` filters. Progress updates are MERGE operations that
carry only status, counts and time: a cancel flag set meanwhile by another process is never
overwritten. Records keep their JSON value in one string property and use the entity ETag.
Tables are created by the first write that finds them missing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any, TypeVar

from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceModifiedError, ResourceNotFoundError
from azure.data.tables import TableClient, TableTransactionError, UpdateMode

from dagq.backends.azure.errors import Guard
from dagq.backends.azure.naming import escape_key, unescape_key
from dagq.core.limits import entity_problem
from dagq.errors import AlreadyExists, NotFound, PreconditionFailed, StoreError
from dagq.ports import IndexRow

T = TypeVar("T")
INDEX_PARTITION = "wf"
NEW = "*new"
# An entity group transaction holds at most 100 entities of one partition and less than
# 4 MiB (https://learn.microsoft.com/azure/storage/tables/scalability-targets); JSON
# records are kept well under that, leaving room for the request's own framing.
TRANSACTION_ENTITIES = 100
TRANSACTION_BYTES = 2 * 1024 * 1024


class _Table:
    """A table client that creates its table when an insert finds it missing."""

    def __init__(self, client: TableClient, guard: Guard) -> None:
        self.client = client
        self.guard = guard

    def write(self, op: Callable[[], T]) -> T:
        """Run the insert/upsert ``op``, creating the table first if it is missing."""
        with suppress(ResourceNotFoundError):  # on an insert or upsert: a missing table
            return op()
        with suppress(ResourceExistsError):
            self.client.create_table()
        return op()

    def query(self, flt: str, params: dict[str, Any], limit: int | None = None,
              ) -> list[dict[str, Any]]:
        """Entities matching ``flt`` in key order (none when the table is missing)."""
        out: list[dict[str, Any]] = []
        per_page = min(limit, 1000) if limit else None
        try:
            for entity in self.client.query_entities(flt, parameters=params,
                                                     results_per_page=per_page):
                out.append(entity)
                if limit is not None and len(out) >= limit:
                    break
        except ResourceNotFoundError:
            return []
        return out


def _prefix_bounds(prefix: str) -> tuple[str, str]:
    """``lo``/``hi`` such that ``lo <= s < hi`` holds exactly for strings starting with
    ``prefix`` (non-empty)."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


def _check(entity: dict[str, Any], what: str) -> None:
    """Refuse, before any request, an entity the real service would reject."""
    if (problem := entity_problem(entity, what)) is not None:
        raise StoreError(problem)


def _row_to_entity(row: IndexRow) -> dict[str, Any]:
    entity: dict[str, Any] = {
        "PartitionKey": INDEX_PARTITION, "RowKey": escape_key(row.id), "name": row.name,
        "status": row.status, "counts": json.dumps(row.counts, sort_keys=True),
        "created_at": float(row.created_at), "updated_at": float(row.updated_at),
        "cancel_requested": bool(row.cancel_requested),
        "definition_hash": row.definition_hash, "extra": json.dumps(row.extra),
    }
    if row.parent_id is not None:
        entity["parent_id"] = row.parent_id
    if row.parent_task is not None:
        entity["parent_task"] = row.parent_task
    return entity


def _entity_to_row(e: Mapping[str, Any]) -> IndexRow:
    return IndexRow(
        id=unescape_key(e["RowKey"]), name=e.get("name", ""), status=e.get("status", ""),
        counts=json.loads(e.get("counts") or "{}"),
        created_at=float(e.get("created_at", 0.0)), updated_at=float(e.get("updated_at", 0.0)),
        cancel_requested=bool(e.get("cancel_requested", False)),
        parent_id=e.get("parent_id"), parent_task=e.get("parent_task"),
        definition_hash=e.get("definition_hash", ""), extra=json.loads(e.get("extra") or "{}"),
    )


class TableIndex:
    """``Index`` on table ``{p}index``."""

    def __init__(self, client: TableClient, guard: Guard) -> None:
        self._t = _Table(client, guard)

    def create(self, row: IndexRow) -> None:
        """Insert a new row; raises ``AlreadyExists``."""
        entity = _row_to_entity(row)
        _check(entity, f"the index row of workflow {row.id!r}")
        with self._t.guard(f"creating index row {row.id!r}"):
            try:
                self._t.write(lambda: self._t.client.create_entity(entity))
            except ResourceExistsError:
                raise AlreadyExists(f"workflow {row.id!r} is already indexed") from None

    def get(self, workflow_id: str) -> IndexRow:
        """The row; raises ``NotFound``."""
        with self._t.guard(f"reading index row {workflow_id!r}"):
            try:
                entity = self._t.client.get_entity(INDEX_PARTITION, escape_key(workflow_id))
            except ResourceNotFoundError:
                raise NotFound(f"no workflow {workflow_id!r} in the index") from None
        return _entity_to_row(entity)

    def update_progress(self, workflow_id: str, *, status: str, counts: Mapping[str, int],
                        updated_at: float) -> None:
        """MERGE status, counts and time into the row (never touches the cancel flag)."""
        self._merge(workflow_id, {"status": status, "updated_at": float(updated_at),
                                  "counts": json.dumps(dict(counts), sort_keys=True)})

    def request_cancel(self, workflow_id: str, requested: bool = True) -> None:
        """Set (or clear) ``cancel_requested``; raises ``NotFound``."""
        self._merge(workflow_id, {"cancel_requested": requested})

    def query(self, *, status: str | None = None, name_prefix: str | None = None,
              cancel_requested: bool | None = None, limit: int | None = None,
              after: str | None = None) -> list[IndexRow]:
        """Rows matching every given filter, in id order, starting after id ``after``."""
        if limit is not None and limit <= 0:
            return []
        clauses, params = ["PartitionKey eq @pk"], {"pk": INDEX_PARTITION}
        if after is not None:
            clauses.append("RowKey gt @after")
            params["after"] = escape_key(after)
        if status is not None:
            clauses.append("status eq @status")
            params["status"] = status
        if cancel_requested is not None:
            clauses.append("cancel_requested eq @cancel")
            params["cancel"] = cancel_requested  # type: ignore[assignment]
        if name_prefix:
            clauses.append("name ge @lo and name lt @hi")
            params["lo"], params["hi"] = _prefix_bounds(name_prefix)
        with self._t.guard("querying the workflow index"):
            entities = self._t.query(" and ".join(clauses), params, limit)
        return [_entity_to_row(e) for e in entities]

    def delete(self, workflow_id: str) -> None:
        """Remove a workflow's row (no error when absent)."""
        with self._t.guard(f"deleting index row {workflow_id!r}"), \
                suppress(ResourceNotFoundError):
            self._t.client.delete_entity(INDEX_PARTITION, escape_key(workflow_id))

    def _merge(self, workflow_id: str, fields: dict[str, Any]) -> None:
        entity = {"PartitionKey": INDEX_PARTITION, "RowKey": escape_key(workflow_id), **fields}
        with self._t.guard(f"updating index row {workflow_id!r}"):
            try:
                self._t.client.update_entity(entity, mode=UpdateMode.MERGE)
            except ResourceNotFoundError:
                raise NotFound(f"no workflow {workflow_id!r} in the index") from None


class TableRecords:
    """``Records`` on table ``{p}records`` (partition and key escaped into the entity keys)."""

    def __init__(self, client: TableClient, guard: Guard) -> None:
        self._t = _Table(client, guard)

    def get(self, partition: str, key: str) -> tuple[dict[str, Any], str]:
        """The record and its ETag; raises ``NotFound``."""
        with self._t.guard(f"reading record {partition}/{key}"):
            try:
                e = self._t.client.get_entity(escape_key(partition), escape_key(key))
            except ResourceNotFoundError:
                raise NotFound(f"no record {key!r} in partition {partition!r}") from None
        return json.loads(e["json"]), str(e.metadata["etag"])

    def put(self, partition: str, key: str, value: Mapping[str, Any],
            etag: str | None = None) -> str:
        """Upsert; with ``etag`` only if it matches; ``"*new"`` creates only."""
        entity = {"PartitionKey": escape_key(partition), "RowKey": escape_key(key),
                  "json": json.dumps(dict(value), sort_keys=True)}
        _check(entity, f"record {key!r} in partition {partition!r}")
        client = self._t.client
        with self._t.guard(f"writing record {partition}/{key}"):
            if etag is None:
                meta = self._t.write(lambda: client.upsert_entity(entity, mode=UpdateMode.REPLACE))
            elif etag == NEW:
                try:
                    meta = self._t.write(lambda: client.create_entity(entity))
                except ResourceExistsError:
                    raise AlreadyExists(
                        f"record {key!r} already exists in partition {partition!r}") from None
            else:
                try:
                    meta = client.update_entity(entity, mode=UpdateMode.REPLACE, etag=etag,
                                                match_condition=MatchConditions.IfNotModified)
                except (ResourceModifiedError, ResourceNotFoundError):
                    raise PreconditionFailed(
                        f"record {key!r} in partition {partition!r} changed or vanished "
                        f"since ETag {etag}") from None
        return str(meta["etag"])

    def put_many(self, partition: str,
                 items: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Upsert several records of one partition: one entity group transaction per
        ``TRANSACTION_ENTITIES`` records or ``TRANSACTION_BYTES`` of JSON."""
        pk = escape_key(partition)
        batch: list[Any] = []
        size = 0
        for key, value in items:
            text = json.dumps(dict(value), sort_keys=True)
            if batch and (len(batch) == TRANSACTION_ENTITIES
                          or size + len(text) > TRANSACTION_BYTES):
                self._transact(partition, batch)
                batch, size = [], 0
            batch.append(("upsert", {"PartitionKey": pk, "RowKey": escape_key(key),
                                     "json": text}, {"mode": UpdateMode.REPLACE}))
            size += len(text)
        if batch:
            self._transact(partition, batch)

    def _transact(self, partition: str, batch: list[Any]) -> None:
        client = self._t.client
        with self._t.guard(f"writing {len(batch)} records of partition {partition!r}"):
            try:
                client.submit_transaction(batch)
            except TableTransactionError as exc:
                if getattr(exc, "error_code", None) != "TableNotFound":
                    raise
                with suppress(ResourceExistsError):
                    client.create_table()
                client.submit_transaction(batch)

    def delete(self, partition: str, key: str) -> None:
        """Remove a record (no error when absent)."""
        with self._t.guard(f"deleting record {partition}/{key}"), \
                suppress(ResourceNotFoundError):
            self._t.client.delete_entity(escape_key(partition), escape_key(key))

    def list(self, partition: str, prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
        """``(key, record)`` pairs of a partition whose key starts with ``prefix``, by key."""
        clauses, params = ["PartitionKey eq @pk"], {"pk": escape_key(partition)}
        if prefix:
            clauses.append("RowKey ge @lo and RowKey lt @hi")
            params["lo"], params["hi"] = _prefix_bounds(escape_key(prefix))
        with self._t.guard(f"listing records of partition {partition!r}"):
            entities = self._t.query(" and ".join(clauses), params)
        rows = [(unescape_key(e["RowKey"]), json.loads(e["json"])) for e in entities]
        return sorted(rows, key=lambda kv: kv[0])

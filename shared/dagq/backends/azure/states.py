"""State blobs on Blob Storage: ETag compare-and-swap, deltas appended as committed blocks.

A state is the block blob ``{workflow_id}.state`` in container ``{p}-state``. A small
state is written with one Put Blob. A larger one is written as blocks: its snapshot is
one block, and ``append`` stages the delta as a new block (Put Block), then commits the
existing blocks plus the new one with Put Block List under ``If-Match``, so one
conditional request still decides each write, and only the delta and the block list
travel. A Put Block List "updates a blob by uploading only those blocks that have
changed and then committing the new and existing blocks together", and blocks left out
of the list are deleted (https://learn.microsoft.com/rest/api/storageservices/put-block-list).
Staging does not change the committed blob, so a writer that loses the race only leaves
an uncommitted block, which the next commit of anyone discards.

Block ids are unique per write (position plus random), so two writers staging at the
same position never overwrite each other's block. The committed ids are remembered per
ETag; after a write by someone else they are read back with Get Block List (the commit
under ``If-Match`` fails if the blob changed in between, so a stale list cannot win).
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import (
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.storage.blob import BlobBlock, BlobClient, ContainerClient

from dagq.backends.azure.blob import _Container, delete_blob
from dagq.backends.azure.errors import Guard
from dagq.errors import AlreadyExists, NotFound, PreconditionFailed

STATE_SUFFIX = ".state"
BLOCKS_FROM_BYTES = 4096
"""States at least this large are written as blocks, so later deltas can be appended
(the same size from which ``dagq.core.engine.journal`` writes deltas)."""
MAX_JOURNAL = 256
"""Deltas after one snapshot: each commit lists every block id (~40 bytes of XML each),
so a long journal makes every commit larger; a blob may hold 50,000 committed blocks."""
_KNOWN = 4096


class BlobStates:
    """``StateStore`` on blobs ``{workflow_id}.state`` in container ``{p}-state``."""

    max_journal = MAX_JOURNAL
    delta_tasks = 0
    """By size only: an append is two requests (Put Block, Put Block List), a small
    snapshot one (Put Blob)."""

    def __init__(self, client: ContainerClient, guard: Guard) -> None:
        self._c = _Container(client, guard)
        self._blocks: OrderedDict[str, tuple[str, list[str]]] = OrderedDict()
        self._lock = threading.Lock()  # coordinators write from several threads

    def read(self, workflow_id: str) -> tuple[bytes, str]:
        """The state bytes and their ETag; raises ``NotFound``."""
        name = workflow_id + STATE_SUFFIX
        with self._c.guard(f"reading the state {self._c.describe(name)}"):
            try:
                stream = self._c.client.get_blob_client(name).download_blob()
            except ResourceNotFoundError:
                raise NotFound(f"no state for workflow {workflow_id!r}") from None
            data = stream.readall()
            return data, str(stream.properties.etag)

    def etag(self, workflow_id: str) -> str:
        """The blob's current ETag (Get Blob Properties: headers only); raises
        ``NotFound``."""
        name = workflow_id + STATE_SUFFIX
        with self._c.guard(f"reading the ETag of the state {self._c.describe(name)}"):
            try:
                props = self._c.client.get_blob_client(name).get_blob_properties()
            except ResourceNotFoundError:
                raise NotFound(f"no state for workflow {workflow_id!r}") from None
            return str(props.etag)

    def create(self, workflow_id: str, data: bytes) -> str:
        """Create the state blob only if absent; returns its ETag; raises ``AlreadyExists``."""
        name = self._c.checked(workflow_id + STATE_SUFFIX)
        blob = self._c.client.get_blob_client(name)
        with self._c.guard(f"creating the state {self._c.describe(name)}"):
            try:
                return self._c.write(lambda: self._whole(
                    workflow_id, blob, data, match_condition=MatchConditions.IfMissing))
            except (ResourceExistsError, ResourceModifiedError):  # 409, or 412 from a commit
                raise AlreadyExists(f"workflow {workflow_id!r} already has a state") from None

    def replace(self, workflow_id: str, data: bytes, etag: str) -> str:
        """Overwrite only if the ETag is still ``etag``; returns the new ETag."""
        name = workflow_id + STATE_SUFFIX
        blob = self._c.client.get_blob_client(name)
        with self._c.guard(f"replacing the state {self._c.describe(name)}"):
            return self._conditional(workflow_id, blob, etag, lambda: self._whole(
                workflow_id, blob, data, etag=etag,
                match_condition=MatchConditions.IfNotModified))

    def append(self, workflow_id: str, data: bytes, etag: str) -> str:
        """Add ``data`` as a new committed block only if the ETag is still ``etag``."""
        name = workflow_id + STATE_SUFFIX
        blob = self._c.client.get_blob_client(name)
        with self._c.guard(f"appending to the state {self._c.describe(name)}"):
            return self._conditional(workflow_id, blob, etag,
                                     lambda: self._append(workflow_id, blob, data, etag))

    def list_ids(self, prefix: str = "") -> Iterator[str]:
        """Ids of all stored workflows starting with ``prefix``."""
        with self._c.guard(f"listing states in container {self._c.client.container_name!r}"):
            try:
                names = list(self._c.client.list_blob_names(name_starts_with=prefix or None))
            except ResourceNotFoundError:
                names = []
        return iter([n[: -len(STATE_SUFFIX)] for n in names if n.endswith(STATE_SUFFIX)])

    def delete(self, workflow_id: str) -> None:
        """Remove a workflow's state blob (no error when absent)."""
        self._forget(workflow_id)
        delete_blob(self._c, workflow_id + STATE_SUFFIX)

    # -- writes ------------------------------------------------------------------------
    def _conditional(self, workflow_id: str, blob: BlobClient, etag: str, op: Any) -> str:
        try:
            result: str = op()
            return result
        except ResourceModifiedError:
            self._forget(workflow_id)
            if not blob.exists():  # If-Match on a missing blob also answers 412
                raise NotFound(f"no state for workflow {workflow_id!r}") from None
            raise PreconditionFailed(
                f"the state of workflow {workflow_id!r} changed since ETag {etag}") from None
        except ResourceNotFoundError:
            self._forget(workflow_id)
            raise NotFound(f"no state for workflow {workflow_id!r}") from None

    def _whole(self, workflow_id: str, blob: BlobClient, data: bytes, **cond: Any) -> str:
        """Write ``data`` as the whole blob: one Put Blob when small, else one block."""
        if len(data) < BLOCKS_FROM_BYTES:
            meta: dict[str, Any] = blob.upload_blob(data, overwrite=True, **cond)
            self._forget(workflow_id)
            return str(meta["etag"])
        return self._commit(workflow_id, blob, [], data, **cond)

    def _append(self, workflow_id: str, blob: BlobClient, data: bytes, etag: str) -> str:
        with self._lock:
            known = self._blocks.get(workflow_id)
        if known is not None and known[0] == etag:
            ids = known[1]
        else:
            committed, _ = blob.get_block_list("committed")
            ids = [b.id for b in committed]
        if not ids:  # written by one Put Blob: carry its bytes over as the first block
            old = blob.download_blob(etag=etag, match_condition=MatchConditions.IfNotModified)
            data = old.readall() + data
        return self._commit(workflow_id, blob, ids, data, etag=etag,
                            match_condition=MatchConditions.IfNotModified)

    def _commit(self, workflow_id: str, blob: BlobClient, ids: list[str], data: bytes,
                **cond: Any) -> str:
        """Stage ``data`` as a new block and commit ``ids`` plus it under ``cond``."""
        new = f"{len(ids):06d}{secrets.token_hex(8)}"  # every id of a blob has one length
        blob.stage_block(new, data)
        try:
            meta: dict[str, Any] = blob.commit_block_list(
                [BlobBlock(block_id=i) for i in [*ids, new]], **cond)
        except HttpResponseError as exc:
            if getattr(exc, "error_code", None) == "InvalidBlockList":
                # our remembered ids no longer exist: someone rewrote the blob since
                self._forget(workflow_id)
                raise ResourceModifiedError("the committed blocks changed") from exc
            raise
        with self._lock:
            self._blocks[workflow_id] = (str(meta["etag"]), [*ids, new])
            self._blocks.move_to_end(workflow_id)
            while len(self._blocks) > _KNOWN:
                self._blocks.popitem(last=False)
        return str(meta["etag"])

    def _forget(self, workflow_id: str) -> None:
        with self._lock:
            self._blocks.pop(workflow_id, None)

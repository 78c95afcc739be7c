"""Output objects (with MD5) on Blob Storage, and the container plumbing states share.

Containers are created on first write: a write that finds its container missing creates
it and tries once more, so steady-state operations cost exactly one request each.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from contextlib import suppress
from typing import TypeVar

from azure.core.exceptions import (
    ResourceExistsError,
    ResourceNotFoundError,
)
from azure.storage.blob import ContainerClient, ContentSettings

from dagq.backends.azure.errors import Guard
from dagq.core.limits import blob_name_problem
from dagq.errors import NotFound, StoreError

T = TypeVar("T")


class _Container:
    """A container client that creates its container when a write finds it missing."""

    def __init__(self, client: ContainerClient, guard: Guard) -> None:
        self.client = client
        self.guard = guard

    def write(self, op: Callable[[], T]) -> T:
        """Run the write ``op``, creating the container first if it is missing."""
        try:
            return op()
        except ResourceNotFoundError as exc:
            if getattr(exc, "error_code", None) != "ContainerNotFound":
                raise
        with suppress(ResourceExistsError):
            self.client.create_container()
        return op()

    def checked(self, name: str) -> str:
        """``name``, if the real service accepts it as a blob name; else ``StoreError``."""
        if (problem := blob_name_problem(name)) is not None:
            raise StoreError(f"cannot write {name[:120]!r}: {problem}")
        return name

    def describe(self, name: str) -> str:
        return f"blob {name!r} in container {self.client.container_name!r}"


def delete_blob(container: _Container, name: str) -> None:
    with container.guard(f"deleting {container.describe(name)}"), \
            suppress(ResourceNotFoundError):  # the blob or its container is gone already
        container.client.delete_blob(name)


class BlobOutputs:
    """``OutputStore`` on blobs in container ``{p}-outputs``; each blob carries its
    Content-MD5."""

    def __init__(self, client: ContainerClient, guard: Guard) -> None:
        self._c = _Container(client, guard)

    def put(self, name: str, data: bytes) -> str:
        """Store ``data`` under ``name`` (overwrite); returns its hex MD5."""
        digest = hashlib.md5(data, usedforsecurity=False).digest()
        settings = ContentSettings(content_md5=bytearray(digest))
        blob = self._c.client.get_blob_client(self._c.checked(name))
        with self._c.guard(f"writing {self._c.describe(name)}"):
            self._c.write(lambda: blob.upload_blob(data, overwrite=True,
                                                   content_settings=settings))
        return digest.hex()

    def get(self, name: str) -> bytes:
        """The stored bytes; raises ``NotFound``."""
        with self._c.guard(f"reading {self._c.describe(name)}"):
            try:
                return self._c.client.get_blob_client(name).download_blob().readall()
            except ResourceNotFoundError:
                raise NotFound(f"no output object {name!r}") from None

    def list(self, prefix: str) -> list[tuple[str, int, str]]:
        """``(name, size, md5)`` of every object whose name starts with ``prefix``."""
        what = f"listing {prefix!r}* in container {self._c.client.container_name!r}"
        with self._c.guard(what):
            try:
                blobs = list(self._c.client.list_blobs(name_starts_with=prefix or None))
            except ResourceNotFoundError:
                return []
        out = []
        for b in blobs:
            md5 = b.content_settings.content_md5
            out.append((str(b.name), int(b.size), bytes(md5).hex() if md5 else ""))
        return out

    def delete(self, name: str) -> None:
        """Remove an object (no error when absent)."""
        delete_blob(self._c, name)

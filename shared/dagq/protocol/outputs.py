"""Stored outputs as the protocol carries them: fetched by reference, verified by MD5."""

from __future__ import annotations

import hashlib

from dagq.core.model import OutputRef
from dagq.errors import TaskError
from dagq.ports import Backend


def fetch_verified(backend: Backend, ref: OutputRef) -> bytes:
    """Bytes of ``ref`` from output storage, checked against its MD5."""
    data = backend.outputs.get(ref.name)
    digest = hashlib.md5(data, usedforsecurity=False).hexdigest()
    if digest != ref.md5:
        raise TaskError(f"output {ref.name} is corrupt: MD5 {digest} != expected {ref.md5}")
    return data

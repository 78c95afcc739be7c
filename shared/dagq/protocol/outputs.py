"""Stored outputs as the protocol carries them: fetched by reference, verified by MD5."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

from dagq.core.model import OutputRef
from dagq.errors import TaskError
from dagq.ports import Backend
from dagq.protocol.messages import TaskMessage


def fetch_verified(backend: Backend, ref: OutputRef) -> bytes:
    """Bytes of ``ref`` from output storage, checked against its MD5."""
    data = backend.outputs.get(ref.name)
    digest = hashlib.md5(data, usedforsecurity=False).hexdigest()
    if digest != ref.md5:
        raise TaskError(f"output {ref.name} is corrupt: MD5 {digest} != expected {ref.md5}")
    return data


def expand(backend: Backend, task: TaskMessage) -> TaskMessage:
    """``task`` with the kwargs, inputs and params its sender stored apart put back."""
    if task.payload_ref is None:
        return task
    payload = json.loads(fetch_verified(backend, task.payload_ref))
    return replace(task, kwargs=payload["kwargs"], inputs=payload["inputs"],
                   params=payload["params"], payload_ref=None)

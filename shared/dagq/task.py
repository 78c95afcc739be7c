"""Helpers for task scripts: sugar over the script contract (``DAGQ_*`` environment).

    from dagq.task import set_output, get_upstream_output
    features = get_upstream_output("featurize")
    set_output({"mae": 0.03})

Outputs and inputs work without a store; helpers that need one (real upstreams behind
merge nodes, cancellation, file stashing, synced directories) open the store named by
``DAGQ_STORE``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from dagq.core import paths
from dagq.core.model import OutputRef
from dagq.errors import TaskError
from dagq.ports import Backend

FILE_KEY = "$dagq_file"
"""Key marking a stashed-file reference inside an output."""


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise TaskError(f"{name} is not set: this helper only works inside a dagq task")
    return value


def set_output(value: Any) -> None:
    """Publish ``value`` (any JSON-serialisable value) as this task's output."""
    try:
        data = json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise TaskError(f"set_output() needs a JSON-serialisable value: {exc}") from None
    Path(_env("DAGQ_OUTPUT_FILE")).write_text(data)


def get_item() -> Any:
    """The item of this instance of a mapped task (``map: {over: ...}``): any JSON value.
    Raises ``TaskError`` in a task that is not an instance of a mapped task."""
    text = os.environ.get("DAGQ_ITEM_JSON")
    if text is None:
        raise TaskError("get_item() works only in an instance of a mapped task (a task with "
                        "map: {over: ...}); this task has no item")
    return json.loads(text)


def get_upstream_outputs() -> dict[str, Any]:
    """Outputs of the direct upstream tasks that succeeded (skipped ones map to None)."""
    return dict(_inputs())


def _inputs() -> dict[str, Any]:
    """The inputs file, read once per process (and again only if the file changes)."""
    path = os.environ.get("DAGQ_INPUTS_FILE")
    if not path:
        return {}
    try:
        st = os.stat(path)
    except OSError:
        return {}
    return _read_inputs(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4)
def _read_inputs(path: str, mtime_ns: int, size: int) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(path).read_text())
    return data


def get_upstream_output(name: str) -> Any:
    """The output of upstream task ``name`` (None if it has none or was skipped).

    Works for direct dependencies and for the real upstream tasks hidden behind merge
    nodes made by ``--max-fan-in``. Each process reads the inputs file once and, behind
    merge nodes, the workflow state once, so reading N outputs costs O(N) in all.
    """
    inputs = _inputs()
    if name in inputs:
        return inputs[name]
    if not any(key.startswith("__merge_") for key in inputs):
        return None
    upstream = _real_upstream(_env("DAGQ_WORKFLOW_ID"), _env("DAGQ_TASK"))
    if name not in upstream.outputs:
        return None
    return upstream.value(name)


def get_real_upstream_tasks() -> list[str]:
    """Upstream task names, looking through merge nodes to the original dependencies."""
    inputs = _inputs()
    if not any(name.startswith("__merge_") for name in inputs):
        return list(inputs)
    return list(_real_upstream(_env("DAGQ_WORKFLOW_ID"), _env("DAGQ_TASK")).outputs)


class _RealUpstream:
    """The real upstream tasks of one task and their outputs, from one state read;
    large outputs are fetched (and MD5-checked) on first use, then kept."""

    def __init__(self, workflow_id: str, task: str) -> None:
        from dagq.client import WorkflowClient
        from dagq.core.transforms import real_upstream_tasks

        self.client = WorkflowClient(_backend())
        state = self.client.state(workflow_id)
        self.outputs: dict[str, Any] = {}
        self.refs: dict[str, OutputRef] = {}
        for name in real_upstream_tasks(state.definition, task):
            view = state.task_view(name)
            self.outputs[name] = view.output
            if view.output_ref is not None:
                self.refs[name] = view.output_ref

    def value(self, name: str) -> Any:
        """The output of ``name`` (a real upstream task)."""
        ref = self.refs.pop(name, None)
        if ref is not None:
            self.outputs[name] = self.client.fetch_output(ref)
        return self.outputs[name]


@functools.lru_cache(maxsize=4)
def _real_upstream(workflow_id: str, task: str) -> _RealUpstream:
    return _RealUpstream(workflow_id, task)


def is_cancelled() -> bool:
    """True if this task's workflow has been cancelled (checks the store)."""
    from dagq.errors import NotFound

    try:
        row = _backend().index.get(_env("DAGQ_WORKFLOW_ID"))
    except NotFound:
        return False
    return row.cancel_requested or row.status == "cancelled"


def get_params() -> dict[str, Any]:
    """Parameters of this workflow run (from a parent workflow or a schedule)."""
    raw = os.environ.get("DAGQ_PARAMS") or "{}"
    params: dict[str, Any] = json.loads(raw)
    return params


def stash_file(path: str | Path, name: str | None = None) -> dict[str, Any]:
    """Store a file in output storage; returns a reference to put in an output."""
    p = Path(path)
    data = p.read_bytes()
    obj = paths.file_name(_env("DAGQ_WORKFLOW_ID"), _env("DAGQ_TASK"), name or p.name)
    md5 = _backend().outputs.put(obj, data)
    return {FILE_KEY: {"name": obj, "md5": md5, "size": len(data), "filename": name or p.name}}


def fetch_file(ref: dict[str, Any], dest: str | Path) -> Path:
    """Download a stashed file to ``dest`` (a directory or a file path), verifying its MD5."""
    try:
        info = ref[FILE_KEY]
        obj, md5 = str(info["name"]), str(info["md5"])
    except (KeyError, TypeError):
        raise TaskError(f"not a stashed-file reference: {ref!r}") from None
    data = _backend().outputs.get(obj)
    actual = hashlib.md5(data, usedforsecurity=False).hexdigest()
    if actual != md5:
        raise TaskError(f"stashed file {obj} is corrupt: MD5 {actual} != expected {md5}")
    target = Path(dest)
    if target.is_dir():
        target = target / str(info.get("filename") or Path(obj).name)
    target.write_bytes(data)
    return target


def fetch_dir(task: str | None = None, dest: str | Path = ".",
              workflow_id: str | None = None) -> list[Path]:
    """Download the directory that ``task`` synced with ``kwargs.bg_dirsync_to`` into
    ``dest``, verifying each file's MD5; returns the paths written.

    ``task`` defaults to this task (a retried attempt resuming from its checkpoints) and
    may be the ``dest`` name a sync spec gave; ``workflow_id`` defaults to this workflow.
    """
    from dagq.protocol.synced import download_synced

    wf = workflow_id or _env("DAGQ_WORKFLOW_ID")
    return download_synced(_backend().outputs, wf, task or _env("DAGQ_TASK"), Path(dest))


@functools.lru_cache(maxsize=1)
def _backend() -> Backend:
    from dagq.config import Settings
    from dagq.wiring import backend_from_settings

    return backend_from_settings(Settings.from_env())

"""The environment of task processes: the worker's own made usable from a task, and
each attempt's ``TaskContext`` (its ``DAGQ_*`` variables, inputs and output files)."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dagq.config import Settings
from dagq.core.mapping import ITEM_ENV, ITEM_JSON_ENV, item_text
from dagq.ports import Backend
from dagq.protocol.messages import TaskMessage, ref_from_json
from dagq.protocol.outputs import fetch_verified
from dagq.worker.processors import TaskContext


def task_env(settings: Settings) -> dict[str, str]:
    """The worker's environment plus store settings made absolute for task processes."""
    env = dict(os.environ)
    # tasks find the worker's Python (and its dagq helpers) first on PATH
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    store = settings.store
    if store.startswith("sqlite:"):
        store = "sqlite:" + str(Path(store[len("sqlite:"):]).resolve())
    env["DAGQ_STORE"] = store
    if settings.queues:
        env["DAGQ_QUEUES"] = settings.queues
    env.pop("DAGQ_CRASH_AT", None)
    return env


INPUTS_FILE = "inputs.json"
"""The file in an attempt's working directory holding its upstream outputs."""
OUTPUT_FILE = "output.json"
"""The file in an attempt's working directory the task writes its output to."""


def task_context(backend: Backend, task: TaskMessage, workdir: Path, gpus: list[str] | None,
                 *, env: Mapping[str, str], log_dir: Path, stop: threading.Event,
                 kill_timeout: float, resolve: bool = True) -> TaskContext:
    """The context one attempt runs in: its inputs file (upstream outputs fetched unless
    ``resolve`` is false), output file, environment and GPUs."""
    inputs = resolve_inputs(backend, task) if resolve else {}
    inputs_file = workdir / INPUTS_FILE
    _write_new(inputs_file, json.dumps(inputs).encode())
    output_file = workdir / OUTPUT_FILE
    full = dict(env)
    full.update({
        "DAGQ_WORKFLOW_ID": task.workflow_id, "DAGQ_TASK": task.task,
        "DAGQ_ATTEMPT": str(task.attempt), "DAGQ_OUTPUT_FILE": str(output_file),
        "DAGQ_INPUTS_FILE": str(inputs_file), "DAGQ_PARAMS": json.dumps(task.params),
    })
    if task.mapped:
        full[ITEM_ENV] = item_text(task.item)
        full[ITEM_JSON_ENV] = json.dumps(task.item)
    if gpus is not None:
        full["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        full.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    safe = task.key.replace("/", "__")
    return TaskContext(
        message=task, env=full, workdir=workdir, output_file=output_file,
        inputs_file=inputs_file, log_path=log_dir / f"{safe}.log", stop=stop,
        kill_timeout=kill_timeout,
    )


def _write_new(path: Path, data: bytes) -> None:
    """Write ``data`` to the new file ``path`` with three system calls (``write_text``
    adds a stat, a terminal check and a seek, each a hand-over of the interpreter lock
    that the worker's other slots wait on)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def resolve_inputs(backend: Backend, task: TaskMessage) -> dict[str, Any]:
    """The direct upstream outputs of ``task``, stored ones fetched and MD5-checked."""
    raw = task.inputs
    if task.inputs_ref is not None:
        raw = json.loads(fetch_verified(backend, task.inputs_ref))
    out: dict[str, Any] = {}
    for name, value in raw.items():
        ref = ref_from_json(value)
        if ref is not None:
            value = json.loads(fetch_verified(backend, ref))
        elif isinstance(value, list) and any(ref_from_json(v) for v in value):
            value = [_fetched(backend, v) for v in value]  # a mapped task's outputs
        out[name] = value
    return out


def _fetched(backend: Backend, value: Any) -> Any:
    ref = ref_from_json(value)
    return json.loads(fetch_verified(backend, ref)) if ref is not None else value

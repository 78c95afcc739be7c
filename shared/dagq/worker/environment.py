"""The environment of task processes: the worker's own made usable from a task, and
each attempt's ``TaskContext`` (its ``DAGQ_*`` variables, inputs and output files)."""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dagq.config import Settings
from dagq.core.mapping import ITEM_ENV, ITEM_JSON_ENV, item_text
from dagq.ports import Backend
from dagq.protocol.messages import TaskMessage, ref_from_json
from dagq.protocol.outputs import fetch_verified
from dagq.worker.pacer import PACER, Pacer
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


_WORKDIRS = itertools.count()


def new_workdir() -> Path:
    """A new, private (0700) working directory for one attempt, under the temporary folder.

    Named by this process's id and a counter: ``tempfile.mkdtemp`` draws a random name
    for each call, which costs about four times the ``mkdir`` itself. A name that exists
    already (a directory left by an earlier process of the same id, or one planted by
    someone else) is never reused: ``mkdir`` refuses it, and ``mkdtemp`` picks another."""
    path = os.path.join(tempfile.gettempdir(), f"dagq-task-{os.getpid()}-{next(_WORKDIRS)}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        path = tempfile.mkdtemp(prefix="dagq-task-")
    return Path(path)


def remove_workdir(path: Path) -> None:
    """Remove an attempt's working directory: most hold only the files the worker put
    there, and removing those by name costs a fraction of walking the tree."""
    if not _remove_known(path):  # the task left more behind
        shutil.rmtree(path, ignore_errors=True)


def discard_workdir(path: Path, pacer: Pacer = PACER) -> None:
    """Remove an attempt's working directory off the slot's path, on the worker's pacer
    thread (removing two files and a directory takes about 0.2 ms on some file systems,
    which the next attempt need not wait for); what a task left behind is removed by a
    thread of its own, so the pacer's other callbacks are not held up."""

    def remove() -> None:
        with _PENDING_LOCK:
            if path not in _PENDING:  # removed by remove_pending_workdirs
                return
            _PENDING.discard(path)
        if not _remove_known(path):
            threading.Thread(target=shutil.rmtree, args=(path,), kwargs={"ignore_errors": True},
                             name="dagq-workdir-removal", daemon=True).start()

    with _PENDING_LOCK:
        _PENDING.add(path)
    pacer.call_later(REMOVE_AFTER_S, remove)


def remove_pending_workdirs() -> None:
    """Remove now the directories ``discard_workdir`` has not removed yet (a worker that
    stops leaves none behind)."""
    with _PENDING_LOCK:
        paths = list(_PENDING)
        _PENDING.clear()
    for path in paths:
        remove_workdir(path)


REMOVE_AFTER_S = 0.05
"""How long a discarded workdir waits: removals due together run in one wake-up of the
pacer, not one each (at hundreds of tasks a second, each wake-up is a hand-over of the
interpreter lock the slots wait on)."""
_PENDING: set[Path] = set()
_PENDING_LOCK = threading.Lock()


def _remove_known(path: Path) -> bool:
    """Remove ``path`` holding at most the files the worker knows (True), trying the
    output file only when the directory is not empty after the inputs file went."""
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path / INPUTS_FILE)
        try:
            os.rmdir(path)
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY:
                raise
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path / OUTPUT_FILE)
            os.rmdir(path)  # not empty still: the task left more (rmtree)
    except FileNotFoundError:  # the directory is gone already
        return True
    except OSError:
        return False
    return True

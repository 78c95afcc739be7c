"""A store, the real ``dagq`` processes on it, and an in-process view of the same store.

``Stack`` builds on the end-to-end harness (``tests.e2e.harness.Dagq``): processes are
started with the store's environment (SQLite file or a fresh Azurite prefix), while the
test watches the store directly (heartbeat records, output objects, task states) through
its own backend, which costs no process start per look.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagq.backends import open_backend
from dagq.client import WorkflowClient
from dagq.ports import Backend
from dagq.protocol.heartbeats import PARTITION
from tests.e2e.harness import TERMINAL, Dagq, Proc, eventually

SCRIPTS = Path(__file__).resolve().parent / "scripts"

STACK_ENV = {
    "DAGQ_VISIBILITY_TIMEOUT": "60",
    "DAGQ_HEARTBEAT_INTERVAL": "0.5",
    "DAGQ_CANCEL_POLL_INTERVAL": "0.2",
    "DAGQ_KILL_TIMEOUT": "5",
    "DAGQ_MAX_IDLE_BACKOFF": "0.2",
    "COLUMNS": "250",
}
"""A visibility timeout long enough that "released at once" differs from "came back after
the timeout"; quick heartbeats, cancel polls and kill escalation."""


@dataclass
class Stack:
    """The CLI and an in-process backend on one store."""

    dagq: Dagq
    store: str
    connection_string: str | None = None
    backend: Backend = field(init=False)

    def __post_init__(self) -> None:
        self.backend = open_backend(self.store, connection_string=self.connection_string)
        self.client = WorkflowClient(self.backend)

    @property
    def root(self) -> Path:
        """The test's temporary directory (process logs and definitions live here)."""
        return self.dagq.root

    def close(self) -> None:
        """Stop every process, then close the backend."""
        self.dagq.close()
        self.backend.close()

    # -- processes ---------------------------------------------------------------------
    def worker(self, queue: str, *args: str, env: dict[str, str] | None = None) -> Proc:
        """Start ``dagq worker QUEUE ARGS`` (with the stack's settings, not the e2e ones)."""
        return self.dagq.start(f"worker-{queue}", "worker", queue, *args, env=env)

    def coordinator(self) -> Proc:
        """Start ``dagq coordinator``."""
        return self.dagq.coordinator()

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``dagq ARGS`` to the end (any exit code)."""
        return self.dagq.run(*args)

    def submit(self, name: str, tasks: list[dict[str, Any]], **fields: Any) -> str:
        """Submit a definition through ``dagq submit``; the workflow id."""
        return self.dagq.submit(self.dagq.define(name, tasks, **fields))

    # -- looking at the store ----------------------------------------------------------
    def wait_terminal(self, wf_id: str, deadline_s: float = 60.0) -> str:
        """The workflow's terminal status, polled in-process."""
        def probe() -> str | None:
            status = self.client.row(wf_id).status
            return status if status in TERMINAL else None

        try:
            return eventually(probe, f"workflow {wf_id} to end", deadline_s)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.dagq.diagnostics(wf_id)}") from None

    def tasks(self, wf_id: str) -> dict[str, dict[str, Any]]:
        """Task summaries by name."""
        return {t["name"]: t for t in self.client.tasks(wf_id)}

    def heartbeat(self, worker: Proc) -> dict[str, Any] | None:
        """The heartbeat record of the worker process ``worker`` (None if not written yet)."""
        for key, rec in self.backend.records.list(PARTITION):
            if rec.get("pid") == worker.popen.pid:
                return {"id": key, **rec}
        return None

    def wait_heartbeat(self, worker: Proc) -> dict[str, Any]:
        """The first heartbeat of ``worker`` (it is up and serving its queue)."""
        return eventually(lambda: self.heartbeat(worker), f"a heartbeat of {worker.name}", 30)

    def synced(self, prefix: str) -> dict[str, str]:
        """Output objects under ``prefix``: relative name -> MD5."""
        return {name[len(prefix):]: md5 for name, _, md5 in self.backend.outputs.list(prefix)}


def wait_file(path: Path, deadline_s: float = 30.0) -> str:
    """The text of ``path`` once it exists and is not empty."""
    def probe() -> str | None:
        return path.read_text() if path.exists() and path.stat().st_size else None

    return eventually(probe, f"{path} to be written", deadline_s)


def run_gpu_probes(stack: Stack, queue: str, count: int = 4) -> dict[str, dict[str, Any]]:
    """Run ``count`` tasks of ``scripts/slots.py`` on ``queue`` to completion; what each
    recorded (its devices and those of the tasks that ran beside it), by task name. Fails
    if two tasks running at once shared a device, or if no two tasks ran at once."""
    probe = stack.root / "probe"
    tasks = [{"name": f"t{i}", "kwargs": {"cmd": f"{sys.executable} {SCRIPTS / 'slots.py'} "
                                                 f"{probe}"}} for i in range(count)]
    wf = stack.submit("slots", tasks, default_queue=queue)
    assert stack.wait_terminal(wf) == "completed"
    seen = {p.stem: json.loads(p.read_text()) for p in (probe / "seen").glob("*.json")}
    assert sorted(seen) == [f"t{i}" for i in range(count)]
    overlaps = 0
    for name, rec in seen.items():
        mine = set(rec["devices"].split(","))
        for peer, devices in rec["peers"].items():
            overlaps += 1
            assert not mine & set(devices.split(",")), f"{name} and {peer} shared a GPU: {seen}"
    assert overlaps, f"no two tasks ran at the same time, so nothing was checked: {seen}"
    return seen

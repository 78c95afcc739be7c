"""Generated task outputs through a real worker and coordinator (threads on one embedded
store): every attempt runs once, the coordinator stays alive, every workflow ends, and a
workflow beside the odd outputs completes (bounded: a fixed number of examples)."""

from __future__ import annotations

import json
import shlex
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagq.backends import open_backend
from dagq.client import WorkflowClient
from dagq.config import Settings
from dagq.core.model import TaskDef, WorkflowDef
from dagq.runtime.coordinator import Coordinator
from dagq.worker.runtime import Worker

TEXT = st.text(st.characters(blacklist_categories=()), max_size=20)
LEAF = st.one_of(st.none(), st.booleans(), st.integers(), TEXT,
                 st.floats(allow_nan=True, allow_infinity=True))
VALUES = st.recursive(LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)), max_leaves=20)
OUTPUT = st.one_of(
    VALUES.map(lambda v: json.dumps(v).encode()),
    VALUES.map(lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass")),
    st.integers(1, 3000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(4301, 6000).map(lambda n: b"9" * n),
    st.binary(max_size=64))


class _Stack:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.backend = open_backend(f"sqlite:{root / 'x.db'}")
        self.client = WorkflowClient(self.backend)
        fast = Settings(idle_poll=0.05, sweep_interval=1.0, max_idle_backoff=0.1,
                        visibility_timeout=60.0)
        self.coordinator = Coordinator(self.backend, fast, children=self.client)
        self.worker = Worker(self.backend, fast, "default", concurrency=4,
                             log_dir=root / "logs")
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.coordinator.run, args=(self.stop,)),
                        threading.Thread(target=self.worker.run, args=(False,))]
        self.log = root / "runs.log"
        self.n = 0

    def close(self) -> None:
        self.stop.set()
        self.worker.shutdown()
        for t in self.threads:
            t.join(timeout=60)
        self.backend.close()

    def task(self, output: bytes) -> TaskDef:
        self.n += 1
        path = self.root / f"out-{self.n}"
        path.write_bytes(output)
        cmd = (f"echo \"$DAGQ_WORKFLOW_ID $DAGQ_TASK $DAGQ_ATTEMPT\" >> {self.log}; "
               f"cat {shlex.quote(str(path))} > \"$DAGQ_OUTPUT_FILE\"")
        return TaskDef(f"t{self.n}", {"cmd": cmd})


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Stack]:
    s = _Stack(tmp_path_factory.mktemp("fuzz-outputs"))
    for t in s.threads:
        t.start()
    yield s
    s.close()


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(outputs=st.lists(OUTPUT, min_size=1, max_size=4))
def test_generated_outputs_never_stall_or_rerun(stack: _Stack, outputs: list[bytes]) -> None:
    odd = stack.client.submit(WorkflowDef("odd", tuple(stack.task(o) for o in outputs))).id
    fine = stack.client.submit(WorkflowDef("fine", (stack.task(b'{"ok": 1}'),))).id
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        rows = [stack.client.row(w) for w in (odd, fine)]
        if all(r.status in ("completed", "failed", "cancelled") for r in rows):
            break
        time.sleep(0.1)
    assert stack.client.row(fine).status == "completed"
    assert stack.client.row(odd).status in ("completed", "failed")
    assert all(t.is_alive() for t in stack.threads), "the coordinator or worker exited"
    runs = stack.log.read_text().splitlines()
    assert len(runs) == len(set(runs)), "an attempt ran twice"
    for task in stack.client.tasks(odd):
        if task["status"] == "completed":  # what was accepted reads back as stored
            value: Any = stack.client.output(odd, task["name"])
            json.dumps(value, allow_nan=False).encode("utf-8")
        else:
            assert task["status"] == "failed" and task["error"], task

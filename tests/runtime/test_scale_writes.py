"""The coordinator at scale: writes cost what changed, and workflows apply in parallel.

A coordinator drives workflows on synthetic completions (what a worker would send for
every dispatched task), so these tests need no worker processes.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from dagq.backends import open_backend
from dagq.client import WorkflowClient
from dagq.config import Settings
from dagq.core.engine import loads
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES, TaskDef, WorkflowDef
from dagq.ports import Backend
from dagq.protocol.messages import CompletionMessage, decode_task
from dagq.runtime.coordinator import Coordinator


def fan(n: int, name: str = "fan") -> WorkflowDef:
    mids = tuple(TaskDef(f"t{i}", {"cmd": "true"}, ("root",)) for i in range(n))
    return WorkflowDef(name, (TaskDef("root", {"cmd": "true"}), *mids,
                              TaskDef("sink", {"cmd": "true"}, tuple(t.name for t in mids))))


def drive(backend: Backend, coord: Coordinator, client: WorkflowClient, ids: list[str]) -> None:
    """Answer every dispatched task with a success until every workflow has ended."""
    tasks, completions = backend.queues.get("default"), backend.queues.get("completions")
    for _ in range(10_000):
        if all(client.row(i).status in TERMINAL_WORKFLOW_STATUSES for i in ids):
            return
        msgs = tasks.receive(64, 60)
        items = []
        for m in msgs:
            t = decode_task(m.body)
            body = CompletionMessage(t.workflow_id, t.task, t.attempt, True).encode()
            items.append((body, 0.0, f"{t.key}/done"))
        if items:
            completions.send_many(items)
            tasks.delete_many(msgs)
        while coord.step():
            pass
    raise AssertionError("the workflows did not finish")


@pytest.fixture
def backend(tmp_path: Path) -> Backend:
    return open_backend(f"sqlite:{tmp_path / 'x.db'}")


def test_a_large_workflow_is_written_as_deltas_and_reads_back_whole(backend: Backend) -> None:
    client = WorkflowClient(backend)
    wf = client.submit(fan(3000)).id
    snapshot = len(backend.states.read(wf)[0])
    coord = Coordinator(backend, Settings(batch_size=16), children=client)
    before = backend.stats.snapshot()
    drive(backend, coord, client, [wf])
    requests = {k: v - before.get(k, 0) for k, v in backend.stats.snapshot().items()}
    writes = coord.stats.counts["writes"]
    assert requests.get("state.append", 0) > 0.9 * writes  # nearly every write is a delta
    assert requests.get("state.replace", 0) >= 1  # the journal was compacted now and then
    # a write costs what changed: ~16 completions, not the whole 3,002-task state
    assert coord.stats.counts["state_bytes"] / writes < snapshot / 10
    state = loads(backend.states.read(wf)[0])
    assert state.status == "completed" and state.counts() == {"completed": 3002}
    assert all(v.attempt == 1 for v in state.iter_task_views())


def test_a_workflow_of_many_tasks_gets_deltas_while_its_snapshot_is_small(
        backend: Backend) -> None:
    """A 200-task fan-out compresses to a snapshot under 4 KB; encoding it whole on each
    completion costs CPU per task, so its writes are deltas all the same."""
    client = WorkflowClient(backend)
    wf = client.submit(fan(198)).id
    assert len(backend.states.read(wf)[0]) < 4096
    coord = Coordinator(backend, Settings(batch_size=1), children=client)
    before = backend.stats.snapshot()
    drive(backend, coord, client, [wf])
    requests = {k: v - before.get(k, 0) for k, v in backend.stats.snapshot().items()}
    assert requests.get("state.append", 0) > 4 * requests.get("state.replace", 0)
    state = loads(backend.states.read(wf)[0])
    assert state.status == "completed" and state.counts() == {"completed": 200}


def test_workflows_of_one_batch_are_applied_in_parallel_threads(backend: Backend) -> None:
    client = WorkflowClient(backend)
    ids = [client.submit(fan(20, f"w{k}")).id for k in range(12)]
    coord = Coordinator(backend, Settings(apply_concurrency=4, batch_size=64),
                        children=client)
    threads: set[str] = set()
    handle = coord._handle_group

    def recording(*args: object) -> None:
        threads.add(threading.current_thread().name)
        handle(*args)  # type: ignore[arg-type]

    coord._handle_group = recording  # type: ignore[method-assign]
    drive(backend, coord, client, ids)
    assert all(client.row(i).status == "completed" for i in ids)
    assert len({t for t in threads if t.startswith("dagq-apply")}) > 1


def test_apply_concurrency_defaults_to_one_thread_on_the_embedded_store(
        backend: Backend) -> None:
    client = WorkflowClient(backend)
    assert Coordinator(backend, Settings(), children=client)._threads == 1
    azure = Settings(store="azure://acct/p")
    assert Coordinator(backend, azure, children=client)._threads == 8


def test_the_sweep_rereads_a_cached_state_only_when_another_writer_changed_it(
        backend: Backend) -> None:
    client = WorkflowClient(backend)
    wf = client.submit(fan(50)).id
    coord = Coordinator(backend, Settings(batch_size=16), children=client)
    while coord.step():  # dispatch the root
        pass
    tasks, completions = backend.queues.get("default"), backend.queues.get("completions")
    (root,) = tasks.receive(1, 60)
    t = decode_task(root.body)
    completions.send(CompletionMessage(wf, t.task, t.attempt, True).encode())
    while coord.step():
        pass
    coord.sweep(coord.clock())  # clears the sent outbox entries (a write)
    assert coord.caches(wf)
    reads = backend.stats.counts.get("state.read", 0)
    coord.sweep(coord.clock())
    assert backend.stats.counts.get("state.read", 0) == reads  # the cached copy is current
    assert backend.stats.counts.get("state.etag", 0) >= 1
    # another coordinator applies a completion: the cached copy is stale now
    other = Coordinator(backend, Settings(batch_size=16), children=client)
    (mid,) = tasks.receive(1, 60)
    m = decode_task(mid.body)
    completions.send(CompletionMessage(wf, m.task, m.attempt, True).encode())
    while other.step():
        pass
    coord.sweep(coord.clock())
    assert backend.stats.counts.get("state.read", 0) > reads
    cached = coord.writer.cached(wf)
    assert cached is not None and cached.etag == backend.states.etag(wf)

"""Two coordinators on one store at the same time: ETag compare-and-swap keeps them honest,
so every workflow ends as if there were one, and no task runs twice."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dagq.backends import open_backend
from dagq.client import WorkflowClient
from dagq.compose.loader import load_file
from dagq.config import Settings
from dagq.protocol.messages import CompletionMessage
from dagq.protocol.names import COMPLETIONS
from dagq.runtime.coordinator import Coordinator
from tests.e2e.harness import Dagq
from tests.e2e.workloads import check_mix, check_runs, define_mix

pytestmark = pytest.mark.slow

WORKFLOWS = 6


def test_two_coordinators_share_one_store(dagq: Dagq) -> None:
    log = dagq.root / "runs.log"
    path = define_mix(dagq, log)
    # one takes a single completion per receive, so both stay busy on the same workflows
    first = dagq.coordinator(env={"DAGQ_BATCH_SIZE": "1"})
    second = dagq.coordinator()
    dagq.worker("default", concurrency=3)
    dagq.worker("default", concurrency=2)
    ids = dagq.ok("submit", *[str(path)] * WORKFLOWS).split()
    assert len(ids) == WORKFLOWS
    check_mix(dagq, ids)
    for wf in ids:
        check_runs(log, wf, duplicates_allowed=False)
    for c in (first, second):
        assert c.stop() == 0
        assert "coordinator stopped" in c.text(), c.text()


def test_a_stale_cache_never_drops_a_completion(tmp_path: Path) -> None:
    """Deterministic interleaving of two coordinators (in-process): A caches a state, B
    moves the workflow on, then A receives a completion its cached state cannot place.
    A must re-read the stored state rather than acknowledge the completion as stale."""
    store = f"sqlite:{tmp_path / 'x.db'}"
    defn = tmp_path / "chain.yaml"
    defn.write_text("name: chain\ntasks:\n  - {name: a, kind: noop}\n"
                    "  - {name: b, kind: noop, depends_on: [a]}\n")
    settings = Settings(store=store)
    a_backend, b_backend = open_backend(store), open_backend(store)
    coord_a, coord_b = (
        Coordinator(a_backend, settings, children=WorkflowClient(a_backend)),
        Coordinator(b_backend, settings, children=WorkflowClient(b_backend)))
    client = WorkflowClient(a_backend)
    wf = client.submit(load_file(defn)).id
    completions = a_backend.queues.get(COMPLETIONS)

    def done(task: str) -> None:
        completions.send(CompletionMessage(wf, task, 1, success=True).encode())

    assert coord_a.step() == 1  # start: A caches the state with `a` dispatched
    coord_a.flush(time.time() + 60)  # ... and clears its sent outbox (an idle flush)
    done("a")
    assert coord_b.step() == 1  # B applies `a` and dispatches `b`; A's cache is now stale
    done("b")
    assert coord_a.step() == 1
    assert client.state(wf).status == "completed"
    assert coord_a.stats.counts["duplicates"] == 0
    a_backend.close()
    b_backend.close()

"""Fixtures of the metrics tests: a workflow run to its end on the embedded store, in
threads of this process, with a given sink installed."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dagq import metrics  # noqa: E402
from dagq.client import WorkflowClient  # noqa: E402
from dagq.config import Settings  # noqa: E402
from dagq.core.parse import load_definition  # noqa: E402
from dagq.metrics.recording import Sink  # noqa: E402
from dagq.runtime.local import LocalRuntime  # noqa: E402
from dagq.wiring import backend_from_settings  # noqa: E402

FLOW = """\
name: metered
tasks:
  - name: first
    kwargs: {cmd: "true"}
  - name: flaky
    depends_on: [first]
    num_retries: 1
    kwargs: {cmd: "if test -f {marker}; then true; else touch {marker}; exit 1; fi"}
"""

RunFlow = Callable[[Sink], tuple[str, WorkflowClient]]


@pytest.fixture
def run_flow(tmp_path: Path) -> Iterator[RunFlow]:
    """Install a sink, run ``FLOW`` to completion, sweep once and stop the coordinator
    and workers; the id and a client."""
    opened = []

    def run(sink: Sink) -> tuple[str, WorkflowClient]:
        metrics.set_sink(sink)
        settings = Settings.from_env({"DAGQ_STORE": f"sqlite:{tmp_path / 'm.db'}",
                                      "DAGQ_IDLE_POLL": "0.05"})
        backend = backend_from_settings(settings)
        client = WorkflowClient(backend)
        defn = load_definition(FLOW.replace("{marker}", str(tmp_path / "marker")))
        rid = client.submit(defn, workflow_id="metered-1").id
        local = LocalRuntime(backend, settings, {"default"}, 2, children=client)
        opened.append(backend)
        local.start()
        try:
            assert client.wait(rid, 60, interval_s=0.1)["status"] == "completed"
            local.coordinator.sweep(local.coordinator.clock())
        finally:  # stopped: what a test submits afterwards stays where it is put
            local.close()
        return rid, client

    yield run
    metrics.set_sink(None)
    for backend in opened:
        backend.close()

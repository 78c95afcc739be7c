"""Metrics: off by default (and then nothing is imported), the Prometheus text served on
a real loopback socket, and OpenTelemetry metrics and spans (one trace per workflow, one
span per attempt) through the SDK's in-memory reader and exporter."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from dagq import metrics
from dagq.errors import ConfigError
from dagq.metrics.prom import PromSink
from tests.metrics.conftest import RunFlow


def test_off_by_default_and_nothing_imported() -> None:
    assert metrics.wanted({}) == []
    assert metrics.wanted({"DAGQ_METRICS": "none", "DAGQ_METRICS_PORT": "9"}) == []
    assert metrics.wanted({"APPLICATIONINSIGHTS_CONNECTION_STRING": "x"}) == ["azure"]
    assert metrics.wanted({"DAGQ_METRICS": "otlp"}, port=0) == ["otlp", "prometheus"]
    with pytest.raises(ConfigError, match="DAGQ_METRICS"):
        metrics.wanted({"DAGQ_METRICS": "statsd"})
    code = ("import sys, json; from dagq import metrics; import dagq.runtime.coordinator, "
            "dagq.worker.runtime; print(json.dumps([metrics.configure({}) is None, "
            "sorted(m for m in sys.modules if m.startswith(('opentelemetry', "
            "'dagq.metrics.')))]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out) == [True, ["dagq.metrics.recording"]]


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = resp.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def test_prometheus_over_loopback(run_flow: RunFlow) -> None:
    sink = PromSink()
    port = sink.serve(0)
    try:
        _, client = run_flow(sink)
        from dagq.core.parse import load_definition
        from dagq.runtime.metering import sample

        client.submit(load_definition("name: later\ntasks:\n  - {name: a, kwargs: "
                                      "{cmd: 'true'}}\n  - {name: b, depends_on: [a], "
                                      "kwargs: {cmd: 'true'}}\n"))
        sample(sink, client.backend)
        m = scrape(port)
    finally:
        sink.close()
    assert m['dagq_task_duration_seconds_count{cached="false",outcome="success"}'] == 2
    assert m['dagq_task_duration_seconds_count{cached="false",outcome="failed"}'] == 1
    assert m['dagq_task_duration_seconds_bucket{cached="false",outcome="success",le="+Inf"}'] \
        == 2
    assert m['dagq_task_retries_total{queue="default"}'] == 1
    assert m['dagq_task_transitions_total{status="completed"}'] == 2
    assert m['dagq_workflow_finished_total{status="completed"}'] == 1
    assert m["dagq_completion_apply_latency_seconds_count"] == 3
    assert m['dagq_queue_depth{queue="default"}'] == 0
    assert "dagq_cache_hits_total" not in m
    assert m['dagq_tasks{status="pending"}'] == 2


def test_opentelemetry_metrics_and_one_trace_per_workflow(run_flow: RunFlow) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from dagq.metrics.otel import OtelSink, root_span_id_of, trace_id_of

    reader, spans = InMemoryMetricReader(), InMemorySpanExporter()
    sink = OtelSink([reader], [SimpleSpanProcessor(spans)])
    rid, _ = run_flow(sink)
    data = reader.get_metrics_data()
    assert data is not None
    found = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics
             for m in sm.metrics}
    assert {"dagq.task.duration", "dagq.task.retries", "dagq.task.transitions",
            "dagq.workflow.finished", "dagq.completion.apply_latency",
            "dagq.queue.depth"} <= set(found)
    assert found["dagq.task.duration"].unit == "s"
    finished = spans.get_finished_spans()
    attempts = sorted(s.name for s in finished if s.parent is not None)
    assert attempts == ["first attempt 1", "flaky attempt 1", "flaky attempt 2"]
    assert {s.context.trace_id for s in finished} == {trace_id_of(rid)}
    [root] = [s for s in finished if s.parent is None]
    assert root.context.span_id == root_span_id_of(rid)
    assert root.attributes is not None and root.attributes["dagq.status"] == "completed"
    assert all(s.parent is None or s.parent.span_id == root.context.span_id
               for s in finished)
    failed = next(s for s in finished if s.name == "flaky attempt 1")
    assert failed.status.status_code.name == "ERROR"
    assert all(s.start_time is not None and s.end_time is not None
               and s.start_time <= s.end_time for s in finished)
    sink.shutdown()

"""The OpenTelemetry sink (the ``metrics`` extra): instruments on an SDK MeterProvider,
and spans on a TracerProvider with one trace per workflow.

The trace id of a workflow is derived from its id (``trace_id_of``), and so is the span
id of its root span, so attempt spans reported by any coordinator instance, at any time,
land in the same trace without passing any context along: an attempt's span is a child of
the workflow span, which is written when the workflow finishes. Imported only when
``DAGQ_METRICS`` (or ``APPLICATIONINSIGHTS_CONNECTION_STRING``) asks for it.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from dagq.metrics.recording import HISTOGRAM_BOUNDS, Attempt, Attrs

_UNITS = {"dagq.task.duration": "s", "dagq.completion.apply_latency": "s"}
Key = tuple[tuple[str, str], ...]


def trace_id_of(workflow_id: str) -> int:
    """The 128-bit trace id of a workflow's trace."""
    return int(hashlib.sha256(f"trace\0{workflow_id}".encode()).hexdigest()[:32], 16)


def root_span_id_of(workflow_id: str) -> int:
    """The 64-bit span id of a workflow's root span."""
    return int(hashlib.sha256(f"span\0{workflow_id}".encode()).hexdigest()[:16], 16) or 1


class _Ids(RandomIdGenerator):
    """Random ids, except for a root span being started with chosen ones."""

    def __init__(self) -> None:
        self.local = threading.local()

    def generate_trace_id(self) -> int:
        chosen: int | None = getattr(self.local, "trace_id", None)
        return chosen if chosen is not None else super().generate_trace_id()

    def generate_span_id(self) -> int:
        chosen: int | None = getattr(self.local, "span_id", None)
        self.local.span_id = None
        return chosen if chosen is not None else super().generate_span_id()


def _ns(t: float) -> int:
    return int(t * 1e9)


class OtelSink:
    """Metrics and spans through the OpenTelemetry SDK."""

    def __init__(self, readers: Sequence[MetricReader], processors: Sequence[SpanProcessor],
                 role: str = "coordinator") -> None:
        resource = Resource.create({"service.name": "dagq", "service.namespace": "dagq",
                                    "dagq.role": role})
        views = [View(instrument_name=n, aggregation=ExplicitBucketHistogramAggregation(
            list(HISTOGRAM_BOUNDS))) for n in _UNITS]
        self.meters = MeterProvider(resource=resource, metric_readers=list(readers),
                                    views=views)
        self.ids = _Ids()
        self.tracers = TracerProvider(resource=resource, id_generator=self.ids)
        for p in processors:
            self.tracers.add_span_processor(p)
        self.meter = self.meters.get_meter("dagq")
        self.tracer = self.tracers.get_tracer("dagq")
        self._lock = threading.Lock()
        self._instruments: dict[str, Any] = {}
        self._gauges: dict[str, dict[Key, float]] = {}

    @classmethod
    def from_env(cls, env: Mapping[str, str], names: Iterable[str],
                 role: str) -> OtelSink:
        """Exporters for ``names`` (``otlp``: the standard ``OTEL_EXPORTER_OTLP_*``
        variables; ``azure``: ``APPLICATIONINSIGHTS_CONNECTION_STRING``)."""
        readers: list[MetricReader] = []
        processors: list[SpanProcessor] = []
        interval_ms = float(env.get("DAGQ_METRICS_EXPORT_INTERVAL") or 60) * 1000
        for name in names:
            if name == "otlp":
                from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                    OTLPMetricExporter,
                )
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )

                readers.append(PeriodicExportingMetricReader(
                    OTLPMetricExporter(), export_interval_millis=interval_ms))
                processors.append(BatchSpanProcessor(OTLPSpanExporter()))
            elif name == "azure":
                from azure.monitor.opentelemetry.exporter import (
                    AzureMonitorMetricExporter,
                    AzureMonitorTraceExporter,
                )

                conn = env["APPLICATIONINSIGHTS_CONNECTION_STRING"]
                readers.append(PeriodicExportingMetricReader(
                    AzureMonitorMetricExporter(connection_string=conn),
                    export_interval_millis=interval_ms))
                processors.append(BatchSpanProcessor(
                    AzureMonitorTraceExporter(connection_string=conn)))
        return cls(readers, processors, role)

    def _instrument(self, name: str, kind: str) -> Any:
        inst = self._instruments.get(name)
        if inst is None:
            with self._lock:
                inst = self._instruments.get(name)
                if inst is None:
                    unit = _UNITS.get(name, "1")
                    inst = (self.meter.create_counter(name, unit=unit) if kind == "counter"
                            else self.meter.create_histogram(name, unit=unit))
                    self._instruments[name] = inst
        return inst

    def add(self, name: str, value: float, attrs: Attrs) -> None:
        self._instrument(name, "counter").add(value, dict(attrs))

    def observe(self, name: str, value: float, attrs: Attrs) -> None:
        self._instrument(name, "histogram").record(value, dict(attrs))

    def gauge(self, name: str, values: Mapping[Key, float]) -> None:
        with self._lock:
            first = name not in self._gauges
            self._gauges[name] = dict(values)
        if first:
            def observe(_: CallbackOptions, name: str = name) -> Iterable[Observation]:
                with self._lock:
                    current = dict(self._gauges.get(name, {}))
                return [Observation(v, dict(k)) for k, v in current.items()]

            self.meter.create_observable_gauge(name, callbacks=[observe], unit="1")

    def attempt(self, a: Attempt) -> None:
        parent = trace.set_span_in_context(trace.NonRecordingSpan(SpanContext(
            trace_id_of(a.workflow_id), root_span_id_of(a.workflow_id), is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED))))
        span = self.tracer.start_span(
            f"{a.task} attempt {a.attempt}", context=parent, kind=SpanKind.INTERNAL,
            start_time=_ns(a.start),
            attributes={"dagq.workflow_id": a.workflow_id, "dagq.task": a.task,
                        "dagq.attempt": a.attempt, "dagq.outcome": a.outcome,
                        "dagq.worker": a.worker})
        if a.outcome == "failed":
            span.set_status(Status(StatusCode.ERROR, a.error[:500]))
        span.end(end_time=_ns(a.end))

    def workflow(self, workflow_id: str, name: str, status: str, start: float,
                 end: float) -> None:
        self.ids.local.trace_id = trace_id_of(workflow_id)
        self.ids.local.span_id = root_span_id_of(workflow_id)
        try:
            span = self.tracer.start_span(
                f"workflow {name}", context=trace.set_span_in_context(trace.INVALID_SPAN),
                start_time=_ns(start),
                attributes={"dagq.workflow_id": workflow_id, "dagq.workflow": name,
                            "dagq.status": status})
        finally:
            self.ids.local.trace_id = None
            self.ids.local.span_id = None
        if status != "completed":
            span.set_status(Status(StatusCode.ERROR, status))
        span.end(end_time=_ns(end))

    def shutdown(self) -> None:
        """Flush and stop the exporters."""
        self.meters.shutdown()
        self.tracers.shutdown()

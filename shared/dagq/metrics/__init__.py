"""Optional metrics and traces of the coordinator (docs/metrics.md).

``sink`` is None unless ``configure`` found an exporter to use, so the cost on the hot
path is one ``if metrics.sink is not None`` and nothing here imports OpenTelemetry or
opens a socket until then:

- ``prometheus``: our own registry (``dagq.metrics.prom``), served as Prometheus text on
  ``dagq coordinator --metrics-port`` (or ``DAGQ_METRICS_PORT``);
- ``otlp`` / ``azure``: the OpenTelemetry SDK (``dagq.metrics.otel``, the ``metrics``
  extra), exporting over OTLP or to Azure Monitor with
  ``APPLICATIONINSIGHTS_CONNECTION_STRING``; spans too (one trace per workflow, one span
  per attempt).

``DAGQ_METRICS`` names the exporters (comma-separated); unset, Azure Monitor is used
when ``APPLICATIONINSIGHTS_CONNECTION_STRING`` is set and its exporter is installed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from dagq.errors import ConfigError

if TYPE_CHECKING:
    from dagq.metrics.recording import Sink

log = logging.getLogger("dagq.metrics")

sink: Sink | None = None
"""The configured sink, or None (then nothing is recorded)."""

SETTING = "DAGQ_METRICS"
PORT_SETTING = "DAGQ_METRICS_PORT"
AI_SETTING = "APPLICATIONINSIGHTS_CONNECTION_STRING"
EXPORTERS = ("prometheus", "otlp", "azure", "none")


def wanted(env: Mapping[str, str], port: int | None = None) -> list[str]:
    """The exporters ``env`` (and a ``--metrics-port``) ask for."""
    raw = (env.get(SETTING) or "").strip().lower()
    names = [n.strip() for n in raw.split(",") if n.strip()]
    for n in names:
        if n not in EXPORTERS:
            raise ConfigError(f"{SETTING}={raw!r}: {n!r} is not one of "
                              f"{', '.join(EXPORTERS)} (e.g. {SETTING}=prometheus,otlp)")
    if "none" in names:
        return []
    if (port is not None or env.get(PORT_SETTING)) and "prometheus" not in names:
        names.append("prometheus")
    if not raw and env.get(AI_SETTING):
        names.append("azure")
    return names


def configure(env: Mapping[str, str], *, port: int | None = None,
              role: str = "coordinator") -> Sink | None:
    """Set ``sink`` from ``env`` and return it (None: metrics stay off). An exporter
    whose packages are missing is logged and skipped, never fatal."""
    global sink
    names = wanted(env, port)
    sinks: list[Sink] = []
    if "prometheus" in names:
        from dagq.metrics.prom import PromSink

        prom = PromSink()
        listen = port if port is not None else int(env.get(PORT_SETTING) or 9464)
        prom.serve(listen, host=env.get("DAGQ_METRICS_HOST") or "127.0.0.1")
        sinks.append(prom)
    otel = [n for n in names if n in ("otlp", "azure")]
    if otel:
        try:
            from dagq.metrics.otel import OtelSink

            sinks.append(OtelSink.from_env(env, otel, role))
        except ImportError as exc:
            if not (env.get(SETTING) or "").strip():  # implied by the App Insights setting
                log.info("metrics: no OpenTelemetry exporter installed (%s)", exc)
            else:
                log.warning("metrics: %s requested but not installed (%s); install the "
                            "`metrics` extra: pip install 'dagq[metrics]'", ", ".join(otel),
                            exc)
    if not sinks:
        sink = None
    elif len(sinks) == 1:
        sink = sinks[0]
    else:
        from dagq.metrics.recording import Fanout

        sink = Fanout(sinks)
    return sink


def set_sink(new: Sink | None) -> None:
    """Install ``new`` (tests, embedders); None turns metrics off."""
    global sink
    sink = new

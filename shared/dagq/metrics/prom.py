"""A small in-process registry rendered as Prometheus text (exposition format 0.0.4) and
served over HTTP on ``/metrics``: what ``dagq coordinator --metrics-port`` exposes
without any third-party package. Names are the OpenTelemetry ones with '.' as '_',
counters end in ``_total`` and seconds-valued histograms in ``_seconds``."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from dagq.metrics.recording import HISTOGRAM_BOUNDS, Attempt, Attrs

Key = tuple[tuple[str, str], ...]
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_SECONDS = frozenset({"dagq.task.duration", "dagq.completion.apply_latency"})
HELP = {
    "dagq.task.duration": "Run time of finished task attempts, as the worker measured it.",
    "dagq.task.transitions": "Task status changes applied, by new status.",
    "dagq.task.retries": "Task attempts dispatched again after a failure.",
    "dagq.cache.hits": "Task results taken from the cache instead of running.",
    "dagq.completion.apply_latency": "From a worker sending a completion to its state write.",
    "dagq.workflow.finished": "Workflows that reached a terminal status.",
    "dagq.queue.depth": "Messages waiting in each queue (approximate).",
    "dagq.tasks": "Tasks of pending and running workflows, by status.",
}


def prom_name(name: str, kind: str) -> str:
    """``dagq.task.duration`` -> ``dagq_task_duration_seconds``; counters get ``_total``."""
    base = name.replace(".", "_")
    if name in _SECONDS:
        base += "_seconds"
    return base + "_total" if kind == "counter" else base


def _labels(key: Key, extra: tuple[tuple[str, str], ...] = ()) -> str:
    pairs = [*key, *extra]
    if not pairs:
        return ""
    esc = [(k, v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"'))
           for k, v in pairs]
    return "{" + ",".join(f'{k}="{v}"' for k, v in esc) + "}"


def _num(x: float) -> str:
    return repr(float(x)) if x != int(x) else str(int(x))


class PromSink:
    """Counters, histograms and gauges in memory (thread-safe); spans are not kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counters: dict[str, dict[Key, float]] = {}
        self.histograms: dict[str, dict[Key, list[float]]] = {}
        """Per key: one count per bound, then +Inf count, then the sum."""
        self.gauges: dict[str, dict[Key, float]] = {}
        self.server: ThreadingHTTPServer | None = None

    def add(self, name: str, value: float, attrs: Attrs) -> None:
        key = tuple(sorted(attrs.items()))
        with self._lock:
            series = self.counters.setdefault(name, {})
            series[key] = series.get(key, 0.0) + value

    def observe(self, name: str, value: float, attrs: Attrs) -> None:
        key = tuple(sorted(attrs.items()))
        with self._lock:
            h = self.histograms.setdefault(name, {}).setdefault(
                key, [0.0] * (len(HISTOGRAM_BOUNDS) + 2))
            for i, bound in enumerate(HISTOGRAM_BOUNDS):
                if value <= bound:
                    h[i] += 1
            h[-2] += 1
            h[-1] += value

    def gauge(self, name: str, values: Mapping[Key, float]) -> None:
        with self._lock:
            self.gauges[name] = dict(values)

    def attempt(self, a: Attempt) -> None:
        """Spans are for OpenTelemetry exporters; Prometheus has none."""

    def workflow(self, workflow_id: str, name: str, status: str, start: float,
                 end: float) -> None:
        """Spans are for OpenTelemetry exporters; Prometheus has none."""

    def render(self) -> str:
        """The exposition text of every series."""
        out: list[str] = []
        with self._lock:
            for kind, table in (("counter", self.counters), ("gauge", self.gauges)):
                for name in sorted(table):
                    pn = prom_name(name, kind)
                    out += [f"# HELP {pn} {HELP.get(name, name)}", f"# TYPE {pn} {kind}"]
                    out += [f"{pn}{_labels(k)} {_num(v)}" for k, v in sorted(table[name].items())]
            for name in sorted(self.histograms):
                pn = prom_name(name, "histogram")
                out += [f"# HELP {pn} {HELP.get(name, name)}", f"# TYPE {pn} histogram"]
                for key, h in sorted(self.histograms[name].items()):
                    for bound, count in zip(HISTOGRAM_BOUNDS, h, strict=False):
                        out.append(f"{pn}_bucket{_labels(key, (('le', _num(bound)),))} "
                                   f"{_num(count)}")
                    out.append(f"{pn}_bucket{_labels(key, (('le', '+Inf'),))} {_num(h[-2])}")
                    out.append(f"{pn}_count{_labels(key)} {_num(h[-2])}")
                    out.append(f"{pn}_sum{_labels(key)} {_num(h[-1])}")
        return "\n".join(out) + "\n"

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Serve ``GET /metrics`` on ``host:port`` from a daemon thread; returns the port
        (``port=0`` picks a free one)."""
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] not in ("/metrics", "/"):
                    self.send_error(404)
                    return
                body = sink.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name="dagq-metrics",
                         daemon=True).start()
        return int(self.server.server_address[1])

    def close(self) -> None:
        """Stop serving."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

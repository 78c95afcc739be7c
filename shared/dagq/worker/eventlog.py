"""The worker's per-task log lines (logger ``dagq.events``) as text or JSON lines.

Long-running processes call ``configure_events(fmt)``: every task start and end is then
one line on stderr. ``json`` writes one JSON object per line with the fields
``time, level, event, workflow_id, task, attempt, run_id, worker`` (and ``result,
duration_s, exit_code, error`` on ``task_end``), the shape Log Analytics and
Application Insights ingest from container output without parsing rules. Without the
call (``dagq run``, library use) the lines go nowhere: ``dagq run`` prints a summary.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

EVENTS = logging.getLogger("dagq.events")
EVENTS.propagate = False
EVENTS.addHandler(logging.NullHandler())


class JsonLines(logging.Formatter):
    """One JSON object per record: time, level, logger, message and the ``dagq`` extras."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(), "logger": record.name,
            "message": record.getMessage(),
        }
        extra = getattr(record, "dagq", None)
        if isinstance(extra, dict):
            out.update(extra)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_events(fmt: str, stream: Any = None) -> logging.Handler:
    """Show ``dagq.events`` lines on ``stream`` (default stderr) as ``text`` or ``json``;
    with ``json`` the process's other log lines become JSON too."""
    handler = logging.StreamHandler(stream or sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonLines())
        for h in logging.getLogger().handlers:
            h.setFormatter(JsonLines())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    EVENTS.addHandler(handler)
    EVENTS.setLevel(logging.INFO)
    return handler

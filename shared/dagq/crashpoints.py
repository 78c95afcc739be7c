"""Test-only crash injection: ``DAGQ_CRASH_AT=point[:N]`` kills the process at a named point.

Crash tests set the variable on a coordinator or worker process; when execution reaches
``point`` for the N-th time (default 1) the process sends itself SIGKILL, exactly like a
power cut at that spot. Without the variable, ``crash_point`` is a dictionary lookup.
"""

from __future__ import annotations

import os
import signal

_SPEC = os.environ.get("DAGQ_CRASH_AT", "")
_POINT, _, _COUNT = _SPEC.partition(":")
_REMAINING = int(_COUNT) if _COUNT.isdigit() else 1


def crash_point(name: str) -> None:
    """Kill this process with SIGKILL if ``DAGQ_CRASH_AT`` names ``name`` and the count is up."""
    global _REMAINING
    if not _POINT or name != _POINT:
        return
    _REMAINING -= 1
    if _REMAINING <= 0:
        os.kill(os.getpid(), signal.SIGKILL)

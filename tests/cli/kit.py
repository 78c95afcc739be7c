"""Helpers of the CLI tests: run ``dagq`` on a store of the test's own, and put a
workflow into a known state without running workers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from dagq.backends import open_backend
from dagq.client import WorkflowClient
from dagq.compose.loader import load_file
from dagq.config import Settings
from dagq.runtime.coordinator import Coordinator

DAGQ = str(Path(sys.executable).parent / "dagq")
REPO = Path(__file__).resolve().parents[2]


def store_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment without any ``DAGQ_*`` of the caller's, on ``tmp_path/x.db``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGQ_")}
    return dict(env, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}", COLUMNS="200", **extra)


def dagq(env: dict[str, str], *args: str, cwd: Path | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``dagq ARGS`` to the end (stdout piped, so not a terminal)."""
    return subprocess.run([DAGQ, *args], env=env, capture_output=True, text=True,
                          cwd=cwd, stdin=subprocess.DEVNULL, timeout=timeout, check=False)


def start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """Start ``dagq ARGS`` in the background."""
    return subprocess.Popen([DAGQ, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def define(tmp_path: Path, name: str, text: str) -> Path:
    """Write a definition file."""
    path = tmp_path / name
    path.write_text(text)
    return path


def submit_dispatched(env: dict[str, str], path: Path, workflow_id: str) -> None:
    """Submit ``path`` and let a coordinator start it and dispatch its ready tasks (no
    worker runs them: they stay queued)."""
    store = env["DAGQ_STORE"]
    backend = open_backend(store)
    client = WorkflowClient(backend)
    client.submit(load_file(path), workflow_id=workflow_id)
    coord = Coordinator(backend, Settings(store=store), children=client)
    while coord.step():
        pass
    backend.close()


def eventually(check: Callable[[], Any], what: str, within: float = 60.0) -> Any:
    """``check()`` once it is truthy; fails after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def is_iso_utc(value: object) -> bool:
    """True for an ISO-8601 UTC time string such as ``2026-12-01T10:15:00.250Z``."""
    if not isinstance(value, str) or not value.endswith("Z"):
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True

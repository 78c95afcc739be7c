"""Local liveness: a file the worker touches while its loops run, read by ``--check``.

A liveness probe that asks the store fails when the store is slow or out, and then the
platform restarts every worker at once and throws their running tasks away. Liveness is
therefore local: a ticker thread rewrites this file every few seconds for as long as the
worker's slot and monitor threads are alive, and ``dagq worker QUEUE --check`` only looks
at the file's age. Readiness (``--ready``) and ``dagq doctor`` use the store's heartbeats.

The file is ``$DAGQ_LIVENESS_FILE``, else ``{tmp}/dagq-worker-{queue}.alive``; it holds
the worker's id and the time of the last touch, and is removed when the worker exits
(unless another worker of the same queue and store on this host has written it since).
(``{tmp}/dagq-worker-{queue}-{digest of DAGQ_STORE}.alive`` in full, so workers of two
stores on one machine keep apart.)
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import quote

STALE_AFTER_S = 60.0
"""A file older than this fails ``--check`` (the ticker touches it every few seconds)."""


def liveness_path(queue: str, store: str, env: dict[str, str] | None = None) -> Path:
    """Where the worker for ``queue`` on ``store`` keeps its liveness file."""
    env = dict(os.environ) if env is None else env
    explicit = env.get("DAGQ_LIVENESS_FILE")
    if explicit:
        return Path(explicit)
    digest = hashlib.sha256(store.encode()).hexdigest()[:8]
    return Path(tempfile.gettempdir()) / f"dagq-worker-{quote(queue, safe='')}-{digest}.alive"


class Liveness:
    """Touches ``path`` every ``every_s`` seconds while the watched threads are alive."""

    def __init__(self, path: Path, worker_id: str, every_s: float = 5.0) -> None:
        self.path = path
        self.worker_id = worker_id
        self.every_s = every_s
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dagq-liveness", daemon=True)

    def watch(self, threads: list[threading.Thread]) -> None:
        """Touch now, and keep touching while every thread of ``threads`` is alive."""
        self._threads = list(threads)
        self.touch()
        self._thread.start()

    def touch(self) -> None:
        """Rewrite the file (atomically; a failure is retried on the next tick)."""
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(f"{self.worker_id} {time.time():.3f}\n")
            os.replace(tmp, self.path)
        except OSError:
            pass

    def stop(self) -> None:
        """Stop touching and remove the file, unless another worker for the same queue
        and store on this host has written it since (it is alive: its probe must pass)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        with contextlib.suppress(OSError):
            if self.path.read_text().split(" ", 1)[0] == self.worker_id:
                self.path.unlink()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            if all(t.is_alive() for t in self._threads):
                self.touch()


def check(path: Path, now: float, stale_after_s: float = STALE_AFTER_S) -> tuple[bool, str]:
    """Whether the worker that keeps ``path`` is alive, and a line saying why."""
    try:
        age = now - path.stat().st_mtime
    except OSError:
        return False, f"no liveness file {path} (is the worker running?)"
    if age > stale_after_s:
        return False, f"liveness file {path} last touched {age:.0f}s ago (limit {stale_after_s:g}s)"
    return True, f"alive (liveness file touched {age:.0f}s ago)"

"""What the handlers of one Functions app share: settings, one backend, one client, and
one coordinator per worker thread.

Nothing is opened at import time: the Functions host indexes the app before any app
setting is checked, so a bad ``DAGQ_STORE`` surfaces on the first invocation as an
error naming the setting, never as an app that fails to load.

Coordinators are per thread because a coordinator caches workflow states and mutates
them in place; two threads (e.g. two Service Bus sessions, or a sweep timer next to a
trigger) must not share one. Between threads, as between instances, the ETag
compare-and-swap on every state write keeps the result correct.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping

from dagq.client import WorkflowClient
from dagq.config import Settings
from dagq.plugins import load_kinds_from_env
from dagq.ports import Backend
from dagq.runtime.coordinator import Coordinator
from dagq.wiring import backend_from_settings


class Runtime:
    """Lazily opened shared objects of one Functions app (safe to use from any thread)."""

    def __init__(self, env: Mapping[str, str] | None = None, *,
                 clock: Callable[[], float] = time.time) -> None:
        self._env = env
        self.clock = clock
        self._lock = threading.Lock()
        self._settings: Settings | None = None
        self._backend: Backend | None = None
        self._client: WorkflowClient | None = None
        self._local = threading.local()
        self._coordinators: list[Coordinator] = []

    @property
    def env(self) -> Mapping[str, str]:
        """The app settings (``os.environ`` unless given)."""
        return os.environ if self._env is None else self._env

    @property
    def settings(self) -> Settings:
        """``Settings`` from the app settings (``ConfigError`` if one is bad)."""
        with self._lock:
            if self._settings is None:
                settings = Settings.from_env(self.env)
                load_kinds_from_env(self.env)  # custom task kinds, before any validation
                from dagq import metrics

                if metrics.sink is None:  # optional exporters (docs/metrics.md)
                    metrics.configure(self.env, role="functions")
                self._settings = settings
            return self._settings

    def backend(self) -> Backend:
        """The store every handler uses (opened on first use)."""
        settings = self.settings
        with self._lock:
            if self._backend is None:
                self._backend = backend_from_settings(settings)
            return self._backend

    def client(self) -> WorkflowClient:
        """The client the HTTP handlers call (the same class the CLI uses)."""
        backend = self.backend()
        with self._lock:
            if self._client is None:
                self._client = WorkflowClient(backend, self.clock)
            return self._client

    def coordinator(self) -> Coordinator:
        """This thread's coordinator."""
        coord: Coordinator | None = getattr(self._local, "coordinator", None)
        if coord is None:
            backend = self.backend()
            coord = Coordinator(backend, self.settings, clock=self.clock,
                                children=WorkflowClient(backend, self.clock))
            self._local.coordinator = coord
            with self._lock:
                self._coordinators.append(coord)
        return coord

    def close(self) -> None:
        """Stop coordinators and close the backend (tests; the host just exits)."""
        with self._lock:
            self._coordinators = []
            backend, self._backend, self._client = self._backend, None, None
            self._local = threading.local()
        if backend is not None:
            backend.close()

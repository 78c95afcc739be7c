"""Settings shared by the CLI, workers, the coordinator and the Functions app.

Every field comes from a ``DAGQ_*`` environment variable; CLI flags override them.
Bad values fail at start-up with a ``ConfigError`` naming the variable, the value and
an example of a good one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from dagq.backends import registry
from dagq.errors import ConfigError

DEFAULT_STORE = "sqlite:.dagq/dagq.db"


@dataclass(frozen=True)
class Settings:
    """Runtime configuration; build with ``Settings.from_env()``."""

    store: str = DEFAULT_STORE
    """``DAGQ_STORE``: ``sqlite:PATH`` or ``azure://ACCOUNT/PREFIX``."""
    storage_connection_string: str | None = None
    """``DAGQ_STORAGE_CONNECTION_STRING``: used instead of a credential (e.g. Azurite)."""
    queues: str | None = None
    """``DAGQ_QUEUES``: ``sb://NAMESPACE`` to put task and completion queues on Service Bus."""
    servicebus_connection_string: str | None = None
    """``DAGQ_SERVICEBUS_CONNECTION_STRING``: used instead of a credential for Service Bus."""
    batch_size: int = 32
    """``DAGQ_BATCH_SIZE``: completions the coordinator takes per receive."""
    batch_wait: float = 0.05
    """``DAGQ_BATCH_WAIT``: after a partial batch from a remote queue, wait this long so the
    next receive takes more at once (fewer requests per task; unused on SQLite)."""
    apply_concurrency: int = 0
    """``DAGQ_APPLY_CONCURRENCY``: workflows whose completions one coordinator applies at
    once (each in its own thread; one workflow is always applied by one thread). 0: 1 on
    the embedded store, whose writes are serialised anyway, and 8 on Azure, where each
    write waits on the network."""
    index_interval: float = 1.0
    """``DAGQ_INDEX_INTERVAL``: least seconds between index-row count updates of one
    workflow (status changes are written at once)."""
    visibility_timeout: float = 60.0
    """``DAGQ_VISIBILITY_TIMEOUT``: seconds a received message stays hidden."""
    idle_poll: float = 0.5
    """``DAGQ_IDLE_POLL``: longest wait of one empty receive (long-poll) in seconds."""
    sweep_interval: float = 10.0
    """``DAGQ_SWEEP_INTERVAL``: seconds between repair/timeout/cancel sweeps."""
    outbox_grace: float = 30.0
    """``DAGQ_OUTBOX_GRACE``: age after which unsent outbox entries are re-sent by anyone."""
    outbox_flush: float = 1.0
    """``DAGQ_OUTBOX_FLUSH``: how soon sent outbox entries are cleared when idle."""
    stale_pending: float = 120.0
    """``DAGQ_STALE_PENDING``: seconds before a never-started workflow is started by a sweep."""
    timeout_grace: float = 60.0
    """``DAGQ_TIMEOUT_GRACE``: extra seconds before the coordinator fails an overdue task."""
    lost_message_after: float = 600.0
    """``DAGQ_LOST_MESSAGE_AFTER``: seconds a dispatched attempt may wait unstarted while
    its queue is empty before the sweep sends its message again (0: never)."""
    max_deliveries: int = 10
    """``DAGQ_MAX_DELIVERIES``: deliveries before a message is dead-lettered."""
    cancel_poll_interval: float = 2.0
    """``DAGQ_CANCEL_POLL_INTERVAL``: seconds between a busy worker's reads of the cancel
    requests (one read per interval for all its running tasks)."""
    kill_timeout: float = 600.0
    """``DAGQ_KILL_TIMEOUT``: seconds between SIGTERM and SIGKILL of a task."""
    max_idle_backoff: float = 2.0
    """``DAGQ_MAX_IDLE_BACKOFF``: upper bound of a worker's empty-queue back-off."""
    heartbeat_interval: float = 10.0
    """``DAGQ_HEARTBEAT_INTERVAL``: seconds between a worker's heartbeats; a worker is live
    while its last heartbeat is younger than three intervals."""
    gpu_health_interval: float = 60.0
    """``DAGQ_GPU_HEALTH_INTERVAL``: seconds between a GPU worker's health checks."""
    scheduled_events_url: str = ""
    """``DAGQ_SCHEDULED_EVENTS_URL``: Azure Scheduled Events endpoint a worker polls for
    preemption notices (off when empty; on Azure VMs use
    ``http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01``)."""
    vm_name: str = ""
    """``DAGQ_VM_NAME``: this VM's name in Scheduled Events (default: asked of the
    metadata service)."""
    max_request_bytes: int = 16 * 1024 * 1024
    """``DAGQ_MAX_REQUEST_BYTES``: largest HTTP request body accepted."""
    pool_size: int = 16
    """``DAGQ_POOL_SIZE``: HTTP connections per Azure service client."""
    dirsync_interval: float = 5.0
    """``DAGQ_DIRSYNC_INTERVAL``: seconds between ``bg_dirsync_to`` rounds unless a task's
    ``every_s`` says otherwise."""
    log_capture: bool = True
    """``DAGQ_LOG_CAPTURE``: store what each attempt prints and its history record
    (``false``: workers discard task output and keep no attempt records)."""
    log_max_bytes: int = 4 * 1024 * 1024
    """``DAGQ_LOG_MAX_BYTES``: most bytes of one attempt's log kept in the store (its first
    and last halves, with a marker where the middle was left out)."""
    log_flush_interval: float = 3.0
    """``DAGQ_LOG_FLUSH_INTERVAL``: longest delay between a task printing a line and the
    line being readable with ``dagq logs``."""
    log_format: str = "text"
    """``DAGQ_LOG_FORMAT``: ``text`` or ``json`` (one JSON object per line) for the
    worker's and coordinator's own log lines."""

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, **overrides: Any
    ) -> Settings:
        """Settings from ``env`` (default ``os.environ``), then non-None ``overrides``."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            var = "DAGQ_" + f.name.upper()
            raw = env.get(var)
            if raw is None or raw == "":
                continue
            values[f.name] = _convert(var, raw, f.default)
        settings = cls(**values)
        clean = {k: v for k, v in overrides.items() if v is not None}
        settings = replace(settings, **clean)
        settings.check()
        return settings

    def check(self) -> None:
        """Raise ``ConfigError`` if a value is unusable."""
        registry.check_urls(self.store, self.queues)
        for name in ("batch_size", "max_deliveries", "max_request_bytes", "pool_size",
                     "log_max_bytes"):
            if getattr(self, name) < 1:
                example = getattr(Settings, name)
                raise ConfigError(f"DAGQ_{name.upper()}={getattr(self, name)} must be at least "
                                  f"1 (e.g. DAGQ_{name.upper()}={example})")
        for name in ("visibility_timeout", "cancel_poll_interval", "sweep_interval",
                     "heartbeat_interval", "index_interval", "dirsync_interval",
                     "log_flush_interval"):
            if getattr(self, name) <= 0:
                example = getattr(Settings, name)
                raise ConfigError(f"DAGQ_{name.upper()}={getattr(self, name)} must be above 0 "
                                  f"seconds (e.g. DAGQ_{name.upper()}={example:g})")
        if self.apply_concurrency < 0:
            raise ConfigError(f"DAGQ_APPLY_CONCURRENCY={self.apply_concurrency} must be 0 "
                              "(automatic) or more (e.g. DAGQ_APPLY_CONCURRENCY=8)")
        if self.log_format not in ("text", "json"):
            raise ConfigError(f"DAGQ_LOG_FORMAT={self.log_format!r} must be 'text' or 'json' "
                              "(e.g. DAGQ_LOG_FORMAT=json)")
        if self.heartbeat_interval <= 0:
            raise ConfigError(f"DAGQ_HEARTBEAT_INTERVAL={self.heartbeat_interval:g} must be "
                              "above 0 seconds (e.g. DAGQ_HEARTBEAT_INTERVAL=10)")

    @property
    def is_embedded(self) -> bool:
        """True when the store is the embedded SQLite file."""
        return self.store.startswith("sqlite:")


def _convert(var: str, raw: str, default: Any) -> Any:
    if isinstance(default, bool):
        return raw.lower() in ("1", "true", "yes", "on")
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"{var}={raw!r} is not an integer (e.g. {var}={default})") from None
    if isinstance(default, float):
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"{var}={raw!r} is not a number (e.g. {var}={default:g})") from None
        if value < 0:
            raise ConfigError(f"{var}={raw!r} must not be negative (e.g. {var}={default:g})")
        return value
    return raw

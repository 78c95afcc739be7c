"""Preemption notice from Azure Scheduled Events: drain before a Spot VM is taken away.

Azure VMs (AKS nodes, Batch pool nodes, scale-set instances) learn of an eviction or
deletion from the instance metadata service: ``GET
http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01`` with the header
``Metadata: true`` returns ``{"DocumentIncarnation": n, "Events": [{"EventId",
"EventType", "Resources": [vm names], "EventStatus", "NotBefore", ...}]}``; a Spot
eviction is ``EventType: Preempt`` with at least 30 seconds' notice, a scale-in or delete
is ``Terminate``. Events of a whole scale-set placement group reach every VM in it, so
only events naming this VM count (see
https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Query for
events" and "Event properties"; the Spot notice:
https://learn.microsoft.com/azure/virtual-machines/spot-vms, "Eviction policy").

With ``DAGQ_SCHEDULED_EVENTS_URL`` set (off by default, since the endpoint exists only on
Azure), a thread polls it every second; on a ``Preempt`` or ``Terminate`` event for this
VM the worker shuts down as on SIGTERM: it stops taking work, sends its tasks SIGTERM
(so they can checkpoint; ``bg_dirsync_to`` makes a last sync) and releases their
messages and claims, so another worker takes them at once and the attempt is not counted
as failed. This VM's name is ``DAGQ_VM_NAME``, else asked of the same metadata service
(``/metadata/instance/compute/name``), else unknown (then every such event counts).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger("dagq.worker")

DEFAULT_URL = "http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01"
"""The Scheduled Events endpoint on every Azure VM (set it as DAGQ_SCHEDULED_EVENTS_URL)."""
DRAIN_EVENTS = frozenset({"Preempt", "Terminate"})
POLL_S = 1.0
TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Notice:
    """An announced eviction of this VM."""

    event_id: str
    event_type: str
    not_before: float | None
    """Epoch seconds after which the VM may go (None: not given)."""


# the metadata service must be reached directly, never through an HTTP(S)_PROXY
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url: str) -> bytes:
    req = urllib.request.Request(url, headers={"Metadata": "true"})
    with _OPENER.open(req, timeout=TIMEOUT_S) as resp:
        body: bytes = resp.read()
        return body


def vm_name_from_metadata(events_url: str, fetch: Callable[[str], bytes] = _get) -> str | None:
    """This VM's name from the metadata service that serves ``events_url`` (None if not)."""
    parts = urlsplit(events_url)
    url = (f"{parts.scheme}://{parts.netloc}/metadata/instance/compute/name"
           "?api-version=2021-02-01&format=text")
    try:
        return fetch(url).decode().strip() or None
    except (OSError, ValueError):
        return None


def find_notice(document: dict[str, Any], vm_name: str | None) -> Notice | None:
    """The first drain-worthy event of ``document`` that names ``vm_name``."""
    for event in document.get("Events") or []:
        if not isinstance(event, dict) or event.get("EventType") not in DRAIN_EVENTS:
            continue
        resources = event.get("Resources") or []
        if vm_name is not None and resources and vm_name not in resources:
            continue
        not_before: float | None = None
        raw = event.get("NotBefore")
        if raw:
            try:
                not_before = parsedate_to_datetime(str(raw)).timestamp()
            except (TypeError, ValueError):
                not_before = None
        return Notice(str(event.get("EventId", "")), str(event["EventType"]), not_before)
    return None


class PreemptionWatch:
    """Polls ``url`` and calls ``on_notice`` once when this VM is about to go."""

    def __init__(self, url: str, on_notice: Callable[[Notice], None], *,
                 vm_name: str | None = None, poll_s: float = POLL_S,
                 fetch: Callable[[str], bytes] = _get) -> None:
        self.url = url
        self.on_notice = on_notice
        self.vm_name = vm_name
        self.poll_s = poll_s
        self.fetch = fetch
        self.notice: Notice | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dagq-preemption", daemon=True)

    def start(self) -> None:
        """Start polling."""
        if self.vm_name is None:
            self.vm_name = vm_name_from_metadata(self.url, self.fetch)
        log.info("watching %s for preemption notices (VM %s)", self.url,
                 self.vm_name or "unknown: any VM's notice counts")
        self._thread.start()

    def stop(self) -> None:
        """Stop polling."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=TIMEOUT_S + 1)

    def poll_once(self) -> Notice | None:
        """One look at the endpoint (errors are logged and mean "no notice")."""
        try:
            document = json.loads(self.fetch(self.url))
        except (OSError, ValueError) as exc:
            log.debug("scheduled events unavailable: %s", exc)
            return None
        return find_notice(document, self.vm_name) if isinstance(document, dict) else None

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            notice = self.poll_once()
            if notice is None:
                continue
            self.notice = notice
            left = (f"{notice.not_before - time.time():.0f}s"
                    if notice.not_before is not None else "unknown time")
            log.warning("%s event %s for this VM (%s left): draining", notice.event_type,
                        notice.event_id, left)
            self.on_notice(notice)
            return


def watch(url: str, vm_name: str | None, kill_timeout: float,
          shutdown: Callable[[], None]) -> PreemptionWatch | None:
    """A started watch calling ``shutdown`` on a notice, or None when ``url`` is empty."""
    if not url:
        return None

    def on_notice(notice: Notice) -> None:
        if notice.not_before is not None and kill_timeout > notice.not_before - time.time():
            log.warning("DAGQ_KILL_TIMEOUT=%gs is longer than the notice: tasks that ignore "
                        "SIGTERM may be lost with the VM (set it to about 20s on Spot)",
                        kill_timeout)
        shutdown()

    w = PreemptionWatch(url, on_notice, vm_name=vm_name or None)
    w.start()
    return w

"""The delivery loop of workflow hooks: signed webhook POSTs and ``events`` queue messages.

``Deliverer`` takes ``Delivery`` messages from the ``notifications`` queue (queued by
``dagq.runtime.notify`` after a state write) and makes each one, in a thread of the
coordinator process (``Coordinator.run`` starts it) so that no HTTP call ever holds up
the coordinator. Each delivery has one record (partition ``notify``) changed only
under ETag compare-and-swap:

- ``sending`` with a lease (``until``): one process is making it; a copy of the message
  (a re-sent outbox entry) or the same message after a crash waits for the lease;
- ``waiting`` with ``next``: the last try failed and a new message was sent with the
  back-off as its delay;
- ``delivered`` or ``failed`` (tries used up, or an answer that retrying cannot change):
  any later copy is deleted unsent.

So a delivery is made once per event, whatever crashes or repeats the sending side; only
a crash between the endpoint's answer and the record write repeats a request (receivers
deduplicate by ``X-Dagq-Event-Id``). Retried: 5xx, 429, time-outs and connection errors;
not retried: any other answer. Back-off ``backoff_s * 2**(try-1)``, capped at
``backoff_max_s``, for at most ``max_tries`` tries (defaults: 2 s doubling to 10 min, 10
tries, about 17 minutes in all).
"""

from __future__ import annotations

import http.client
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from dagq.core.hooks import url_problem
from dagq.crashpoints import crash_point
from dagq.errors import AlreadyExists, NotFound, PreconditionFailed
from dagq.outage import TRANSIENT, Outage
from dagq.ports import Backend, Message
from dagq.protocol import events, names

log = logging.getLogger("dagq.notify")


@dataclass(frozen=True)
class Policy:
    """How hard the loop tries (every field has an environment override, ``from_env``)."""

    timeout_s: float = 10.0
    """Time limit of one request (connect and answer)."""
    max_tries: int = 10
    """Tries of one delivery before it is given up."""
    backoff_s: float = 2.0
    """Wait after the first failed try; doubled after each."""
    backoff_max_s: float = 600.0
    """Longest wait between two tries."""
    idle_s: float = 0.5
    """First wait of an idle loop (doubled while idle, up to ``idle_max_s``)."""
    idle_max_s: float = 2.0
    """Longest wait of an idle loop: a retry is made at most this late."""

    @property
    def lease_s(self) -> float:
        """How long a claimed delivery is left to its claimer (also the visibility
        timeout of its message): longer than any request."""
        return max(5.0, 3 * self.timeout_s)

    def backoff(self, tries: int) -> float:
        """The wait after try number ``tries`` failed."""
        return float(min(self.backoff_max_s, self.backoff_s * 2 ** (tries - 1)))

    @staticmethod
    def from_env(environ: Mapping[str, str] = os.environ) -> Policy:
        """The policy with ``DAGQ_WEBHOOK_TIMEOUT``, ``DAGQ_WEBHOOK_TRIES``,
        ``DAGQ_WEBHOOK_BACKOFF`` and ``DAGQ_WEBHOOK_BACKOFF_MAX`` applied."""
        p = Policy()
        return Policy(float(environ.get("DAGQ_WEBHOOK_TIMEOUT", p.timeout_s)),
                      int(environ.get("DAGQ_WEBHOOK_TRIES", p.max_tries)),
                      float(environ.get("DAGQ_WEBHOOK_BACKOFF", p.backoff_s)),
                      float(environ.get("DAGQ_WEBHOOK_BACKOFF_MAX", p.backoff_max_s)))


class Outcome(NamedTuple):
    """What one try came to."""

    ok: bool
    retry: bool
    """Worth another try (5xx, 429, a time-out, a connection error)."""
    detail: str
    """One short line: the status and the start of the answer, or the error."""


def post(url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> Outcome:
    """POST ``body`` to ``url`` (redirects are not followed); never raises."""
    problem = url_problem(url)
    if problem is not None:
        return Outcome(False, False, problem)
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(host, port, timeout=timeout_s,
                                           context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        conn.request("POST", path, body=body, headers=dict(headers))
        response = conn.getresponse()
        start = response.read(200)  # never the whole answer: it is only logged, clipped
    except (OSError, http.client.HTTPException) as exc:  # time-outs are OSErrors too
        return Outcome(False, True, f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()
    code = response.status
    detail = f"HTTP {code}" + (f": {start[:120].decode('utf-8', 'replace')!r}" if start else "")
    if 200 <= code < 300:
        return Outcome(True, False, detail)
    return Outcome(False, code >= 500 or code == 429, detail)


Poster = Callable[[str, bytes, Mapping[str, str], float], Outcome]


class Deliverer:
    """Makes the deliveries waiting in the ``notifications`` queue."""

    def __init__(self, backend: Backend, *, policy: Policy | None = None,
                 clock: Callable[[], float] = time.time,
                 environ: Mapping[str, str] = os.environ, poster: Poster = post) -> None:
        self.backend = backend
        self.policy = policy or Policy.from_env(environ)
        self.clock = clock
        self.environ = environ
        self.poster = poster
        self.queue = backend.queues.get(names.NOTIFICATIONS)

    def run(self, stop: threading.Event) -> None:
        """Deliver until ``stop`` is set, waiting longer while there is nothing to do."""
        outage = Outage("notifications", log)
        idle = self.policy.idle_s
        while not stop.is_set():
            try:
                n = self.drain()
            except Exception as exc:  # an outage or a bug: back off, never exit
                if not isinstance(exc, TRANSIENT):
                    log.exception("notification delivery round failed; continuing")
                stop.wait(outage.failed(exc))
                continue
            outage.ok()
            if n:
                idle = self.policy.idle_s
            else:
                stop.wait(idle)
                idle = min(idle * 2, self.policy.idle_max_s)

    def drain(self, max_messages: int = 16) -> int:
        """Handle one batch of waiting deliveries; returns how many messages came."""
        msgs = self.queue.receive(max_messages, self.policy.lease_s)
        for msg in msgs:
            self.handle(msg)
        return len(msgs)

    def handle(self, msg: Message) -> None:
        """Make the delivery of ``msg`` unless its record says it is made or being made."""
        try:
            d = events.Delivery.decode(msg.body)
        except ValueError as exc:
            log.warning("dead-lettering notification message %s: %s", msg.id, exc)
            self.queue.dead_letter(msg, str(exc))
            return
        key = events.record_key(d.id)
        now = self.clock()
        rec: dict[str, Any]
        try:
            rec, etag = self.backend.records.get(events.RECORDS, key)
        except NotFound:
            rec, etag = {}, "*new"
        state = rec.get("state")
        if state in ("delivered", "failed"):
            self.queue.delete(msg)  # a copy: the delivery was made (or given up)
            return
        if state == "sending" and rec.get("until", 0) > now:
            return  # being made elsewhere; the message comes back after the lease
        if state == "waiting" and rec.get("next", 0) > now + 1.0:
            return  # an early copy: the message sent with the back-off comes later
        tries = int(rec.get("tries", 0)) + 1
        claim = {"id": d.id, "kind": d.kind, "state": "sending", "tries": tries,
                 "until": now + self.policy.lease_s}
        try:
            etag = self.backend.records.put(events.RECORDS, key, claim, etag=etag)
        except (PreconditionFailed, AlreadyExists):
            return  # another process claimed it first
        crash_point("notify_after_claim")
        outcome = self.deliver(d, tries)
        self.settle(msg, d, key, etag, tries, outcome)

    def settle(self, msg: Message, d: events.Delivery, key: str, etag: str, tries: int,
               outcome: Outcome) -> None:
        """Record what try ``tries`` came to; send the next try when there is one."""
        now = self.clock()
        done: dict[str, Any] = {"id": d.id, "kind": d.kind, "tries": tries, "at": now,
                                "detail": outcome.detail[:300]}
        target = d.url if d.kind == "webhook" else names.EVENTS
        if outcome.ok:
            done["state"] = "delivered"
            log.info("notification %s delivered to %s (try %d, %s)", d.id, target, tries,
                     outcome.detail[:80])
        elif outcome.retry and tries < self.policy.max_tries:
            delay = self.policy.backoff(tries)
            self.queue.send(msg.body, delay_s=delay,
                            message_id=names.bounded(f"{d.id}~try{tries + 1}"))
            done.update(state="waiting", next=now + delay)
            log.warning("notification %s to %s failed (try %d of %d: %s); next try in %.0fs",
                        d.id, target, tries, self.policy.max_tries, outcome.detail[:120],
                        delay)
        else:
            done["state"] = "failed"
            log.error("notification %s to %s given up after %d tr%s: %s", d.id, target,
                      tries, "y" if tries == 1 else "ies", outcome.detail[:200])
        try:
            self.backend.records.put(events.RECORDS, key, done, etag=etag)
        except PreconditionFailed:
            log.warning("notification %s: the lease ran out during the try; its new "
                        "holder decides", d.id)
            return
        self.queue.delete(msg)

    def deliver(self, d: events.Delivery, tries: int) -> Outcome:
        """Make one try of ``d``."""
        if d.kind == "event":
            self.backend.queues.get(names.EVENTS).send(
                events.encode(d.event), message_id=names.bounded(str(d.event.get("id", d.id))))
            return Outcome(True, False, "queued")
        secret = self.environ.get(d.secret_env)
        if not secret:
            return Outcome(False, False, f"the signing secret {d.secret_env} is not set "
                                         f"(an environment variable or app setting)")
        body = events.encode(d.event)
        stamp = str(int(self.clock()))
        headers = {
            "Content-Type": "application/json", "User-Agent": "dagq-webhook/1",
            events.EVENT_ID_HEADER: str(d.event.get("id", "")),
            events.EVENT_TYPE_HEADER: str(d.event.get("type", "")),
            events.TIMESTAMP_HEADER: stamp,
            events.SIGNATURE_HEADER: events.sign(secret.encode(), stamp, body),
            events.ATTEMPT_HEADER: str(tries),
        }
        return self.poster(d.url, body, headers, self.policy.timeout_s)


def start(backend: Backend, environ: Mapping[str, str] = os.environ) -> threading.Event:
    """Start the delivery loop in a daemon thread of this process; set the returned event
    to stop it. ``DAGQ_WEBHOOK_LOOP=0`` starts none (deliveries wait for a process that
    runs one)."""
    stop = threading.Event()
    if environ.get("DAGQ_WEBHOOK_LOOP", "1") != "0":
        loop = Deliverer(backend, environ=environ)
        threading.Thread(target=loop.run, args=(stop,), name="dagq-notify",
                         daemon=True).start()
    return stop

"""Workflow events as they travel: the event document, hook deliveries and webhook signatures.

One event per terminal status a run with hooks reaches (``dagq.core.hooks``). The event
document has the CloudEvents 1.0 JSON shape (``specversion``, ``id``, ``source``,
``type``, ``subject``, ``time``, ``datacontenttype``, ``data``) so Event Grid and Logic
Apps take it as it is; a webhook receives the same document as its body. A
``Delivery`` is one message of the ``notifications`` queue: one hook (a webhook or the
``events`` queue) of one event, made by ``dagq.runtime.webhooks``. Its record in
partition ``notify`` (key ``record_key``) says whether it was made, under ETag CAS.

A webhook request is signed: ``X-Dagq-Signature: sha256=HEX``, the HMAC-SHA256 with the
secret of ``{timestamp}.{raw body}``, where ``X-Dagq-Timestamp`` is the Unix time of the
request in seconds (a receiver refuses old timestamps, so a captured request cannot be
replayed later). ``verify`` is the receiver's side, usable as it is.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from dagq.core.hooks import event_type

SPEC_VERSION = "1.0"
SOURCE = "dagq"
RECORDS = "notify"
"""Records partition of delivery records."""
SIGNATURE_HEADER = "X-Dagq-Signature"
TIMESTAMP_HEADER = "X-Dagq-Timestamp"
EVENT_ID_HEADER = "X-Dagq-Event-Id"
EVENT_TYPE_HEADER = "X-Dagq-Event"
ATTEMPT_HEADER = "X-Dagq-Delivery-Attempt"
TOLERANCE_S = 300
"""How old a signed timestamp ``verify`` accepts by default (seconds)."""

Kind = Literal["webhook", "event"]


def iso_time(at: float) -> str:
    """``at`` (epoch seconds) as RFC 3339 UTC with milliseconds."""
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def document(event_id: str, workflow_id: str, status: str, at: float,
             data: dict[str, Any]) -> dict[str, Any]:
    """The CloudEvents-shaped document of one event."""
    return {
        "specversion": SPEC_VERSION, "id": event_id, "source": SOURCE,
        "type": event_type(status), "subject": f"workflows/{workflow_id}",
        "time": iso_time(at), "datacontenttype": "application/json", "data": data,
    }


def encode(doc: dict[str, Any]) -> bytes:
    """The exact bytes sent (and signed): compact JSON, UTF-8."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def sign(secret: bytes, timestamp: str, body: bytes) -> str:
    """The ``X-Dagq-Signature`` value of ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify(secret: bytes, timestamp: str, body: bytes, signature: str, now: float,
           tolerance_s: float = TOLERANCE_S) -> bool:
    """True when ``signature`` signs ``body`` at ``timestamp`` with ``secret`` and the
    timestamp is within ``tolerance_s`` of ``now`` (compared in constant time)."""
    try:
        age = abs(now - int(timestamp))
    except ValueError:
        return False
    return age <= tolerance_s and hmac.compare_digest(sign(secret, timestamp, body), signature)


@dataclass(frozen=True)
class Delivery:
    """One hook of one event, waiting in the ``notifications`` queue."""

    id: str
    """``{event id}~{field}`` (a webhook) or ``{event id}~event``: unique per event."""
    kind: Kind
    """``webhook`` (an HTTP POST) or ``event`` (a message on the ``events`` queue)."""
    event: dict[str, Any]
    """The event document."""
    url: str = ""
    """The webhook's address."""
    secret_env: str = ""
    """The environment variable holding the webhook's secret."""

    def encode(self) -> bytes:
        """The queue message body."""
        body: dict[str, Any] = {"v": 1, "id": self.id, "kind": self.kind, "event": self.event}
        if self.kind == "webhook":
            body["url"], body["secret_env"] = self.url, self.secret_env
        return encode(body)

    @staticmethod
    def decode(raw: bytes) -> Delivery:
        """A delivery from a queue message body (``ValueError`` when it is not one)."""
        try:
            doc = json.loads(raw)
            if doc.get("v") != 1 or doc["kind"] not in ("webhook", "event"):
                raise ValueError(f"not a delivery: {str(doc)[:80]}")
            if not isinstance(doc["event"], dict) or not isinstance(doc["id"], str):
                raise ValueError("a delivery needs an id and an event document")
            return Delivery(doc["id"], doc["kind"], doc["event"], str(doc.get("url", "")),
                            str(doc.get("secret_env", "")))
        except (KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            raise ValueError(f"not a delivery: {type(exc).__name__}: {exc}") from None


def delivery_id(event_id: str, hook: str) -> str:
    """The id of one delivery of an event: ``hook`` is the webhook's field
    (``on_finish``, ``on_failure``) or ``event`` (the one ``events`` queue message)."""
    return f"{event_id}~{hook}"


def record_key(delivery: str) -> str:
    """The delivery record's key (no ``/``: Table keys refuse it)."""
    return delivery.replace("/", "~")

"""What both coordinator triggers do with the completion-queue messages the host hands over.

1. apply them with this thread's coordinator (state write under ETag, outbox sent);
2. report malformed ones (``BadMessage``) with the reason and let the host acknowledge
   them: a poison message must never come back;
3. clear what this invocation sent from the outbox before returning (the Functions
   host has no idle loop to do it later, and any other instance would otherwise re-send
   those entries once they are older than ``DAGQ_OUTBOX_GRACE``);
4. raise ``RedeliverLater`` when a workflow's write kept conflicting, so the host
   redelivers; applying a message twice is harmless (the engine ignores duplicates).

Store errors propagate too: the host retries, and its own poison handling (Service Bus
max delivery count, the Storage ``-poison`` queue) stops a message that never succeeds.
An outage (``dagq.outage.TRANSIENT``) first holds the invocation for a back-off that
doubles with the delivery count (1 s, 2 s, ... up to ``OUTAGE_HOLD_MAX_S``), so that the
host's few retries span a store outage of minutes instead of seconds.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dagq.functions.runtime import Runtime
from dagq.outage import TRANSIENT
from dagq.runtime.report import Applied

log = logging.getLogger("dagq.functions.coordinator")

PREVIEW = 200
"""Characters of a poison body shown in the log."""
OUTAGE_HOLD_MAX_S = 60.0
"""Longest hold of one invocation during a store outage."""


@dataclass(frozen=True)
class Received:
    """One message as a trigger delivered it."""

    id: str
    """The message id."""
    body: bytes
    """The payload (Storage queue messages already base64-decoded by the host)."""
    delivery_count: int = 1
    """How often it was delivered, 1 the first time."""
    receipt: str | None = None
    """Storage queue pop receipt, when the host passed one."""


class RedeliverLater(Exception):
    """Raised so the host redelivers the messages (a transient condition)."""


PoisonSink = Callable[[Received, str], None]


def apply_received(runtime: Runtime, items: Sequence[Received],
                   poison: PoisonSink | None = None,
                   sleep: Callable[[float], object] = time.sleep) -> Applied:
    """Apply ``items``; report poison via ``poison``; raise ``RedeliverLater`` if needed."""
    coord = runtime.coordinator()
    try:
        result = coord.apply_messages((m.id, m.body) for m in items)
    except TRANSIENT as exc:
        deliveries = max((m.delivery_count for m in items), default=1)
        hold = min(OUTAGE_HOLD_MAX_S, 2.0 ** (deliveries - 1))
        log.warning("store unavailable (%s); holding %.0fs before the host retries "
                    "(delivery %d)", exc, hold, deliveries)
        sleep(hold)
        raise
    try:
        by_id = {m.id: m for m in items}
        for message_id, reason in result.rejected:
            message = by_id[message_id]
            preview = message.body[:PREVIEW].decode("utf-8", "replace")
            log.error("poison completion message %s (delivery %d) acknowledged without "
                      "effect: %s; body starts %r", message_id, message.delivery_count,
                      reason, preview)
            if poison is not None:
                poison(message, reason)
    finally:
        coord.flush(math.inf)
    if result.unapplied:
        raise RedeliverLater(
            f"workflow(s) {', '.join(result.unapplied)} kept losing the state write race; "
            "the host will redeliver their messages")
    return result

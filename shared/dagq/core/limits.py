"""Azure's published limits that dagq must stay within, and pure checks against them.

One place for every number, each with the page that states it, so that validation (what a
user is told at submit time), the protocol (ids and object names built within bounds) and
the Azure adapters (refusing before a request the real service would reject) agree.
Azurite started with ``--loose`` accepts more than the service does; the adapters check
these limits themselves so that tests against it fail where Azure would.

Sources (read 2026-12-01):

- [blobs] https://learn.microsoft.com/rest/api/storageservices/naming-and-referencing-containers--blobs--and-metadata
- [queues] https://learn.microsoft.com/rest/api/storageservices/naming-queues-and-metadata
  and https://learn.microsoft.com/azure/storage/queues/storage-queues-introduction
- [tables] https://learn.microsoft.com/rest/api/storageservices/understanding-the-table-service-data-model
- [accounts] https://learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules
- [servicebus] https://learn.microsoft.com/azure/service-bus-messaging/service-bus-quotas
  and the SDK's property docs (``ServiceBusMessage.MessageId``/``SessionId``: "Maximum length
  is 128 characters", https://learn.microsoft.com/dotnet/api/azure.messaging.servicebus.servicebusmessage.sessionid)
"""

from __future__ import annotations

import re

# -- Blob Storage [blobs] -------------------------------------------------------------------
CONTAINER_NAME = (3, 63)
"""Container names: 3-63 lower-case letters, digits and single hyphens, starting and ending
with a letter or digit."""
BLOB_NAME_MAX_CHARS = 1024
"""A blob name is 1-1,024 characters."""
BLOB_NAME_MAX_SEGMENTS = 254
"""A blob name has at most 254 path segments (``/``-separated)."""

# -- Queue Storage [queues] -----------------------------------------------------------------
QUEUE_NAME = (3, 63)
"""Queue names: 3-63 lower-case letters, digits and single hyphens, starting and ending with
a letter or digit."""
STORAGE_QUEUE_MESSAGE_BYTES = 64 * 1024
"""A Storage queue message is at most 64 KiB as sent (dagq sends base64, so 48 KiB raw)."""
STORAGE_QUEUE_BODY_BYTES = STORAGE_QUEUE_MESSAGE_BYTES // 4 * 3
"""Raw bytes that fit one Storage queue message after base64 encoding."""

# -- Table Storage [tables] -----------------------------------------------------------------
TABLE_NAME = (3, 63)
"""Table names: 3-63 letters and digits, starting with a letter."""
TABLE_KEY_MAX_BYTES = 1024
"""PartitionKey and RowKey are strings of at most 1 KiB, held as UTF-16 (so 512 characters
of the Basic Multilingual Plane)."""
TABLE_STRING_MAX_BYTES = 64 * 1024
"""A string property is at most 64 KiB, held as UTF-16 (32,768 characters)."""
TABLE_ENTITY_MAX_BYTES = 1024 * 1024
"""All of an entity's properties together hold at most 1 MiB."""
TABLE_MAX_PROPERTIES = 255
"""An entity has at most 255 properties, the 3 system properties included."""
TABLE_KEY_FORBIDDEN = re.compile(r"[/\\#?\x00-\x1f\x7f-\x9f]")
"""Characters PartitionKey and RowKey may not hold."""

# -- Storage accounts [accounts] ------------------------------------------------------------
ACCOUNT_NAME = (3, 24)
"""Storage account names: 3-24 lower-case letters and digits."""

# -- Service Bus [servicebus] ---------------------------------------------------------------
SERVICE_BUS_ID_MAX_CHARS = 128
"""``message_id`` and ``session_id`` are at most 128 characters (the SDK refuses longer ones
before sending)."""
SERVICE_BUS_NAMESPACE = (6, 50)
"""Namespace names: 6-50 letters, digits and hyphens, starting with a letter and ending with
a letter or digit."""
SERVICE_BUS_ENTITY_MAX_CHARS = 260
"""A queue name (entity path) is at most 260 characters."""
SERVICE_BUS_STANDARD_MESSAGE_BYTES = 256 * 1024
"""Standard tier: a message (body and properties) is at most 256 KB."""
SERVICE_BUS_PREMIUM_MESSAGE_BYTES = 100 * 1024 * 1024
"""Premium tier: at most 100 MB per message."""

# -- dagq's own bounds, chosen so that every derived name fits the limits above ------------------
STORE_PREFIX = (3, 24)
"""Folded store prefix ``p``: ``{p}-completions`` and ``{p}-q-{queue}`` stay under 63, and
``{p without hyphens}records`` stays a valid table name of at least 3 characters."""
WORKFLOW_ID_MAX_CHARS = 200
"""Workflow ids (only ``A-Z a-z 0-9 . _ ~ -``): a Table key and blob segment with room to spare."""
WORKFLOW_NAME_MAX_CHARS = 200
"""Workflow names are stored in index rows and shown in listings."""
TASK_NAME_MAX_CHARS = 200
"""Task names, as written."""
SEGMENT_MAX_CHARS = 600
"""Longest encoded blob path segment made from one user-chosen name (a task name or a
``bg_dirsync_to.dest``), so that ``outputs/{workflow}/{task}/{attempt}.json`` and the other
object names built from them stay below ``BLOB_NAME_MAX_CHARS``."""


def utf16_bytes(text: str) -> int:
    """Bytes ``text`` takes as UTF-16 (how Table Storage measures strings)."""
    return len(text.encode("utf-16-le", "surrogatepass"))


def table_key_problem(key: str, what: str) -> str | None:
    """Why ``key`` cannot be a PartitionKey or RowKey, or None."""
    size = utf16_bytes(key)
    if size > TABLE_KEY_MAX_BYTES:
        return (f"{what} takes {size} bytes as a Table key; Azure Table Storage allows "
                f"{TABLE_KEY_MAX_BYTES}")
    bad = TABLE_KEY_FORBIDDEN.search(key)
    if bad:
        return f"{what} contains {bad.group()!r}, which Azure Table keys do not allow"
    return None


def blob_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a blob on the real service, or None."""
    if not name:
        return "a blob name cannot be empty"
    if len(name) > BLOB_NAME_MAX_CHARS:
        return (f"blob name is {len(name)} characters long; Azure Blob Storage allows "
                f"{BLOB_NAME_MAX_CHARS}")
    segments = name.split("/")
    if len(segments) > BLOB_NAME_MAX_SEGMENTS:
        return (f"blob name has {len(segments)} path segments; Azure Blob Storage allows "
                f"{BLOB_NAME_MAX_SEGMENTS}")
    for seg in segments:
        if seg in ("", ".", "..") or seg.endswith("."):
            return (f"blob name {name[:80]!r} has the segment {seg!r}, which the service "
                    "would drop or rewrite (empty segments, '.', '..' and trailing dots)")
    return None


def service_bus_id_problem(value: str, what: str) -> str | None:
    """Why ``value`` cannot be a Service Bus message or session id, or None."""
    if len(value) > SERVICE_BUS_ID_MAX_CHARS:
        return (f"{what} is {len(value)} characters long; Service Bus allows "
                f"{SERVICE_BUS_ID_MAX_CHARS}")
    return None


def message_size_problem(size: int, limit: int, what: str) -> str | None:
    """Why a message of ``size`` bytes cannot be sent where ``limit`` bytes fit, or None."""
    if size > limit:
        return f"{what} is {size} bytes; the queue accepts at most {limit}"
    return None


def entity_problem(entity: dict[str, object], what: str) -> str | None:
    """Why the Table entity ``entity`` (keys and properties) would be refused, or None.
    Sizes follow the service's accounting closely enough to stay on the safe side."""
    for key in ("PartitionKey", "RowKey"):
        value = entity.get(key)
        if isinstance(value, str) and (problem := table_key_problem(value, f"the {key} of {what}")):
            return problem
    if len(entity) > TABLE_MAX_PROPERTIES - 1:  # the service adds Timestamp
        return (f"{what} has {len(entity)} properties; Azure Table Storage allows "
                f"{TABLE_MAX_PROPERTIES}")
    total = 0
    for name, value in entity.items():
        size = utf16_bytes(value) if isinstance(value, str) else 8
        if isinstance(value, str) and size > TABLE_STRING_MAX_BYTES:
            return (f"property {name!r} of {what} takes {size} bytes; Azure Table Storage "
                    f"allows {TABLE_STRING_MAX_BYTES} per string property")
        total += size + utf16_bytes(name) + 8
    if total > TABLE_ENTITY_MAX_BYTES:
        return (f"{what} takes about {total} bytes; Azure Table Storage allows "
                f"{TABLE_ENTITY_MAX_BYTES}")
    return None

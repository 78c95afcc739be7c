"""Blob-created events start trigger runs in the Function App (``dagq trigger add
--source blob``; docs/triggers.md).

``DAGQ_BLOB_EVENTS`` chooses the registration:

- ``eventgrid``: function ``blob_created``, an Event Grid trigger. Subscribe it to the
  storage account's ``Microsoft.Storage.BlobCreated`` events (any container; the stored
  triggers' prefixes select). The event's ``subject`` names the container and blob and
  its ``data.eTag`` the version.
- ``blob``: function ``blob_trigger``, a Blob trigger with the Event Grid source (the
  only blob-trigger source the Flex Consumption plan supports) on
  ``%DAGQ_BLOB_TRIGGER_CONTAINER%/{name}`` over the ``AzureWebJobsStorage`` account; the
  version is the blob's ETag from the trigger metadata.
- unset or ``none``: nothing is registered.

Either way each matching trigger submits one run with the id ``run_id(trigger, path,
ETag)``, so redelivered events start nothing twice. A store error raises, so the host
retries the event; a refused run (bad definition for that path) is logged and dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import azure.functions as func

from dagq.errors import ConfigError
from dagq.functions import new_blueprint
from dagq.functions.runtime import Runtime
from dagq.triggers.fire import Fired, fire_matching
from dagq.triggers.store import TriggerStore

log = logging.getLogger("dagq.functions.blob_triggers")

EVENTS_SETTING = "DAGQ_BLOB_EVENTS"
CONTAINER_SETTING = "DAGQ_BLOB_TRIGGER_CONTAINER"
MODES = ("eventgrid", "blob", "none")
BLOB_CREATED = "Microsoft.Storage.BlobCreated"
_SUBJECT = "/blobServices/default/containers/"


def blob_events_mode(env: Mapping[str, str]) -> str:
    """``eventgrid``, ``blob`` or ``none`` (``ConfigError`` for anything else)."""
    mode = (env.get(EVENTS_SETTING) or "none").strip().lower()
    if mode not in MODES:
        raise ConfigError(f"{EVENTS_SETTING}={mode!r} is not one of {', '.join(MODES)} "
                          f"(e.g. {EVENTS_SETTING}=eventgrid)")
    if mode == "blob" and not env.get(CONTAINER_SETTING):
        raise ConfigError(f"{EVENTS_SETTING}=blob needs {CONTAINER_SETTING}, the container "
                          f"the Blob trigger watches (e.g. {CONTAINER_SETTING}=inbox)")
    return mode


def path_of_subject(subject: str) -> str | None:
    """``CONTAINER/NAME`` of a blob event subject, or None for anything else."""
    if not subject.startswith(_SUBJECT):
        return None
    container, sep, name = subject[len(_SUBJECT):].partition("/blobs/")
    return f"{container}/{name}" if sep and container and name else None


def version_of(properties: Mapping[str, Any] | None) -> str | None:
    """The ETag (or version id) in a blob trigger's properties."""
    for key in ("ETag", "Etag", "eTag", "etag", "VersionId"):
        value = (properties or {}).get(key)
        if value:
            return str(value).strip('"')
    return None


def handle(runtime: Runtime, path: str, version: str) -> list[Fired]:
    """Fire every ``blob`` trigger whose prefix ``path`` starts with."""
    triggers = TriggerStore(runtime.backend()).list("blob")
    fired = fire_matching(runtime.client(), triggers, "blob", path, version)
    for f in fired:
        log.info("blob %s (version %s): trigger %s -> %s%s%s", path, version, f.trigger,
                 f.run_id, "" if f.created else " (already existed)",
                 f" refused: {f.error}" if f.error else "")
    return fired


def handle_event(runtime: Runtime, event: func.EventGridEvent) -> list[Fired]:
    """Handle one Event Grid event (other event types and subjects are ignored)."""
    if event.event_type != BLOB_CREATED:
        log.info("ignoring event %s of type %s", event.id, event.event_type)
        return []
    path = path_of_subject(event.subject)
    data = event.get_json()
    version = str(data.get("eTag") or "") if isinstance(data, dict) else ""
    if path is None or not version:
        log.warning("ignoring blob event %s: subject %r, no blob path or eTag", event.id,
                    event.subject)
        return []
    return handle(runtime, path, version.strip('"'))


def handle_blob(runtime: Runtime, blob: func.InputStream) -> list[Fired]:
    """Handle one Blob trigger invocation (``blob.name`` is ``CONTAINER/NAME``)."""
    version = version_of(getattr(blob, "blob_properties", None))
    if not blob.name or version is None:
        raise ValueError(f"blob trigger for {blob.name!r} carries no ETag in its properties")
    return handle(runtime, blob.name, version)


def blob_triggers_blueprint(runtime: Runtime, mode: str) -> func.Blueprint:
    """The registration ``mode`` (``eventgrid`` or ``blob``) asks for."""
    bp = new_blueprint()
    if mode == "eventgrid":
        @bp.function_name("blob_created")
        @bp.event_grid_trigger(arg_name="event")
        def blob_created(event: func.EventGridEvent) -> None:
            handle_event(runtime, event)
    elif mode == "blob":
        @bp.function_name("blob_trigger")
        @bp.blob_trigger(arg_name="blob", path=f"%{CONTAINER_SETTING}%/{{name}}",
                         connection="AzureWebJobsStorage", source=func.BlobSource.EVENT_GRID)
        def blob_trigger(blob: func.InputStream) -> None:
            handle_blob(runtime, blob)
    return bp

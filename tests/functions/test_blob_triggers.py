"""Blob-created events start trigger runs in the Function App: the registrations per
``DAGQ_BLOB_EVENTS`` and the handlers, on SQLite and on Azurite with real blob ETags.
An event delivered twice (same blob version) starts one run; a new version a second."""

from __future__ import annotations

import contextlib
import uuid
from datetime import UTC, datetime
from typing import Any

import azure.functions as func
import pytest
from azure.functions.blob import InputStream

from dagq.errors import ConfigError
from dagq.functions.blob_triggers import blob_events_mode, blob_triggers_blueprint
from dagq.functions.runtime import Runtime
from dagq.triggers.fire import run_id
from dagq.triggers.store import TriggerStore
from tests.functions.host import app_of, user_functions
from tests.functions.test_bindings import STORAGE, indexed, trigger_of
from tests.triggers.conftest import make_trigger


def test_registrations() -> None:
    assert "blob_created" not in indexed(STORAGE)
    eg = indexed({**STORAGE, "DAGQ_BLOB_EVENTS": "eventgrid"})["blob_created"]
    assert trigger_of(eg) == {"direction": "IN", "type": "eventGridTrigger", "name": "event"}
    blob = indexed({**STORAGE, "DAGQ_BLOB_EVENTS": "blob",
                    "DAGQ_BLOB_TRIGGER_CONTAINER": "inbox"})["blob_trigger"]
    assert trigger_of(blob) == {"direction": "IN", "type": "blobTrigger", "name": "blob",
                                "path": "%DAGQ_BLOB_TRIGGER_CONTAINER%/{name}",
                                "connection": "AzureWebJobsStorage", "source": "EventGrid"}
    with pytest.raises(ConfigError, match="DAGQ_BLOB_TRIGGER_CONTAINER"):
        blob_events_mode({"DAGQ_BLOB_EVENTS": "blob"})
    with pytest.raises(ConfigError, match="DAGQ_BLOB_EVENTS"):
        blob_events_mode({"DAGQ_BLOB_EVENTS": "kafka"})


def event(container: str, name: str, etag: str, kind: str = "Microsoft.Storage.BlobCreated"
          ) -> func.EventGridEvent:
    return func.EventGridEvent(
        id=str(uuid.uuid4()), topic="/subscriptions/x/resourceGroups/y/providers/"
        "Microsoft.Storage/storageAccounts/z",
        subject=f"/blobServices/default/containers/{container}/blobs/{name}",
        event_type=kind, event_time=datetime.now(UTC), data_version="",
        data={"api": "PutBlob", "eTag": etag, "contentLength": 4,
              "url": f"https://z.blob.core.windows.net/{container}/{name}"})


def upload(runtime: Runtime, container: str, name: str, data: bytes) -> str:
    """Upload to the store's account (Azurite) and return the blob's ETag; on SQLite a
    made-up ETag from the content."""
    conn = runtime.env.get("DAGQ_STORAGE_CONNECTION_STRING")
    if not conn:
        return f"0x{uuid.uuid5(uuid.NAMESPACE_OID, data.hex()).hex[:16].upper()}"
    from azure.core.exceptions import ResourceExistsError
    from azure.storage.blob import BlobServiceClient

    service = BlobServiceClient.from_connection_string(conn)
    with contextlib.suppress(ResourceExistsError):
        service.create_container(container)
    props = service.get_blob_client(container, name).upload_blob(data, overwrite=True)
    return str(props["etag"]).strip('"')


def runs(runtime: Runtime) -> list[dict[str, Any]]:
    return [r for r in runtime.client().list_workflows() if r["id"].startswith("trig-")]


def test_event_grid_one_run_per_blob_version(runtime: Runtime) -> None:
    container = f"in{uuid.uuid4().hex[:8]}"
    TriggerStore(runtime.backend()).add(make_trigger(f"{container}/scans/", source="blob"))
    TriggerStore(runtime.backend()).add(make_trigger("other/", name="other", source="blob"))
    handler = user_functions(app_of(blob_triggers_blueprint(runtime, "eventgrid")))
    blob_created = handler["blob_created"]
    etag1 = upload(runtime, container, "scans/a.csv", b"v1\n")
    blob_created(event(container, "scans/a.csv", etag1))
    blob_created(event(container, "scans/a.csv", etag1))  # redelivered
    blob_created(event(container, "notes/b.csv", etag1))  # outside the prefix
    blob_created(event(container, "scans/a.csv", etag1, "Microsoft.Storage.BlobDeleted"))
    first = run_id("inbox", f"{container}/scans/a.csv", etag1)
    assert [r["id"] for r in runs(runtime)] == [first]
    state = runtime.client().state(first)
    assert state.definition.params == {"path": f"{container}/scans/a.csv"}
    etag2 = upload(runtime, container, "scans/a.csv", b"v2 longer\n")
    assert etag2 != etag1
    blob_created(event(container, "scans/a.csv", etag2))
    assert sorted(r["id"] for r in runs(runtime)) == sorted(
        [first, run_id("inbox", f"{container}/scans/a.csv", etag2)])


def test_blob_trigger_uses_the_etag_of_the_properties(runtime: Runtime) -> None:
    TriggerStore(runtime.backend()).add(make_trigger("inbox/", source="blob"))
    fn = user_functions(app_of(blob_triggers_blueprint(runtime, "blob")))["blob_trigger"]

    def blob(etag: str) -> InputStream:
        return InputStream(data=b"abc", name="inbox/x/y.json", length=3,
                           blob_properties={"ETag": f'"{etag}"', "ContentLength": 3})

    fn(blob("0x8D1"))
    fn(blob("0x8D1"))
    fn(blob("0x8D2"))
    assert sorted(r["id"] for r in runs(runtime)) == sorted(
        [run_id("inbox", "inbox/x/y.json", "0x8D1"), run_id("inbox", "inbox/x/y.json", "0x8D2")])
    with pytest.raises(ValueError, match="ETag"):
        fn(InputStream(data=b"", name="inbox/z", length=0))

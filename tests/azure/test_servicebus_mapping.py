"""Service Bus message mapping with the SDK's own message classes, and offline failures."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest
from azure.servicebus import ServiceBusMessage, ServiceBusReceivedMessage
from azure.servicebus._pyamqp.message import Header, Properties
from azure.servicebus._pyamqp.message import Message as AmqpMessage

from dagq.backends.azure import open_azure_backend
from dagq.backends.azure.servicebus import (
    ID_PROPERTY,
    ServiceBusQueues,
    build_message,
    session_of,
    to_message,
)
from dagq.errors import ConfigError, StoreError, StoreUnavailable

NOW = 1_800_000_000.0
# An emulator-style string: the SDK connects to plain AMQP on 127.0.0.1, where nothing
# listens, so every operation fails at once without leaving the machine.
NOWHERE = ("Endpoint=sb://127.0.0.1/;SharedAccessKeyName=RootManageSharedAccessKey;"
           "SharedAccessKey=notakey;UseDevelopmentEmulator=true;")


def test_a_send_maps_id_session_and_delay() -> None:
    m = build_message(b'{"x": 1}', delay_s=30.0, message_id="wf/a/1", session_id="wf",
                      now=NOW)
    assert isinstance(m, ServiceBusMessage)
    assert (m.message_id, m.session_id, b"".join(m.body)) == ("wf/a/1", "wf", b'{"x": 1}')
    assert m.scheduled_enqueue_time_utc == dt.datetime.fromtimestamp(NOW + 30, dt.UTC)
    assert m.application_properties is None


def test_an_immediate_send_is_not_scheduled_and_a_copy_keeps_its_original_id() -> None:
    m = build_message(b"x", delay_s=0.0, message_id="copy-1", session_id=None, now=NOW,
                      original_id="wf/a/1")
    assert m.scheduled_enqueue_time_utc is None
    assert m.application_properties == {ID_PROPERTY: "wf/a/1"}


def test_completions_without_a_session_use_the_workflow_id() -> None:
    body = json.dumps({"type": "completion", "workflow_id": "wf-7"}).encode()
    assert session_of(body, "k") == "wf-7"
    assert session_of(b"not json", "k") == "k"
    assert session_of(b"[1, 2]", None) == "dagq"


def _received(delivery_count: int, **props: object) -> ServiceBusReceivedMessage:
    amqp = AmqpMessage(
        header=Header(delivery_count=delivery_count),
        properties=Properties(message_id="wf/a/1", group_id="wf"),
        message_annotations={b"x-opt-enqueued-time": int(NOW * 1000),
                             b"x-opt-sequence-number": 42},
        application_properties={k.encode(): str(v).encode() for k, v in props.items()} or None,
        data=[b'{"task": "a"}'],
    )
    return ServiceBusReceivedMessage(amqp, receiver=None, lock_token=uuid.UUID(int=7))


def test_a_received_message_maps_to_a_port_message() -> None:
    m = to_message(_received(0))
    assert (m.id, m.body, m.delivery_count, m.enqueued_at) == (
        "wf/a/1", b'{"task": "a"}', 1, NOW)
    assert m.receipt == str(uuid.UUID(int=7))
    assert to_message(_received(2)).delivery_count == 3


def test_a_released_copy_reports_the_original_id() -> None:
    assert to_message(_received(0, **{ID_PROPERTY: "wf/b/2"})).id == "wf/b/2"


def test_sb_queues_take_their_names_from_the_store_prefix() -> None:
    backend = open_azure_backend("azure://devstoreaccount1/mlp", "sb://my-namespace",
                                 connection_string="UseDevelopmentStorage=true",
                                 servicebus_connection_string=NOWHERE)
    try:
        assert isinstance(backend.queues, ServiceBusQueues)
        assert backend.queues.get("gpu").name == "gpu"
        assert backend.queues.names_.queue("gpu") == "mlp-q-gpu"
    finally:
        backend.close()


def test_an_unreachable_namespace_fails_fast_and_names_the_setting() -> None:
    backend = open_azure_backend("azure://devstoreaccount1/mlp", "sb://my-namespace",
                                 connection_string="UseDevelopmentStorage=true",
                                 servicebus_connection_string=NOWHERE)
    try:
        with pytest.raises(StoreUnavailable) as err:
            backend.queues.get("default").send(b"x", message_id="k")
    finally:
        backend.close()
    assert "cannot reach" in str(err.value) and "DAGQ_QUEUES='sb://my-namespace'" in str(
        err.value)


def test_a_malformed_service_bus_connection_string_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="DAGQ_SERVICEBUS_CONNECTION_STRING"):
        open_azure_backend("azure://devstoreaccount1/mlp", "sb://my-namespace",
                           connection_string="UseDevelopmentStorage=true",
                           servicebus_connection_string="garbage")


def test_ids_at_and_over_128_characters() -> None:
    build_message(b"x", delay_s=0.0, message_id="m" * 128, session_id="s" * 128, now=NOW)
    for kw in ({"message_id": "m" * 129, "session_id": None},
               {"message_id": None, "session_id": "s" * 129}):
        with pytest.raises(StoreError) as err:
            build_message(b"x", delay_s=0.0, now=NOW, **kw)
        assert "129 characters long; Service Bus allows 128" in str(err.value)


def test_a_long_workflow_id_gives_a_bounded_session() -> None:
    body = json.dumps({"type": "completion", "workflow_id": "w" * 200}).encode()
    session = session_of(body, None)
    assert len(session) == 128 and session == session_of(body, "other")

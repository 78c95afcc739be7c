"""Bad configuration fails fast with a dagq error that names the setting to fix."""

from __future__ import annotations

import re
import socket
from typing import Any

import pytest

from dagq.backends import open_backend
from dagq.backends.azure import open_azure_backend
from dagq.errors import ConfigError, StoreUnavailable
from dagq.ports import Backend
from tests.fixtures.azurite import ACCOUNT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])



def _read_error(backend: Backend) -> str:
    """The message of the ``StoreUnavailable`` a first read from ``backend`` raises."""
    try:
        with pytest.raises(StoreUnavailable) as err:
            backend.states.read("wf")
    finally:
        backend.close()
    return str(err.value)

def test_a_malformed_connection_string_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        open_azure_backend(f"azure://{ACCOUNT}/p123", connection_string="not a connection")
    assert "DAGQ_STORAGE_CONNECTION_STRING" in str(err.value)
    assert "UseDevelopmentStorage=true" in str(err.value)


def test_a_connection_string_for_another_account_is_a_config_error(azurite: str) -> None:
    with pytest.raises(ConfigError) as err:
        open_azure_backend("azure://otheraccount/p123", connection_string=azurite)
    message = str(err.value)
    assert "'devstoreaccount1'" in message and "'otheraccount'" in message
    assert "DAGQ_STORE=azure://devstoreaccount1/p123" in message


def test_an_unreachable_endpoint_names_the_settings(azurite: str) -> None:
    dead = re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{_free_port()}", azurite)
    message = _read_error(open_azure_backend(f"azure://{ACCOUNT}/p123", connection_string=dead))
    assert "cannot reach" in message
    assert "DAGQ_STORE='azure://devstoreaccount1/p123'" in message
    assert "DAGQ_STORAGE_CONNECTION_STRING" in message


def test_a_wrong_account_key_names_the_connection_string(azurite: str) -> None:
    wrong = re.sub(r"AccountKey=[^;]+", "AccountKey=" + "A" * 86 + "==", azurite)
    backend = open_azure_backend(f"azure://{ACCOUNT}/p123", connection_string=wrong)
    try:
        for op in (lambda: backend.states.read("wf"),
                   lambda: backend.index.get("wf"),
                   lambda: backend.queues.get("default")):
            with pytest.raises(StoreUnavailable) as err:
                op()
            assert "refused access" in str(err.value)
            assert "key or SAS in DAGQ_STORAGE_CONNECTION_STRING" in str(err.value)
    finally:
        backend.close()


def test_unknown_schemes_and_bad_queue_urls_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="DAGQ_STORE"):
        open_backend("s3://bucket/prefix")
    with pytest.raises(ConfigError, match="DAGQ_QUEUES"):
        open_azure_backend(f"azure://{ACCOUNT}/p123", "amqp://x",
                           connection_string="UseDevelopmentStorage=true")


@pytest.mark.parametrize(("option", "value", "variable"), [
    ("pool_size", "zero", "DAGQ_POOL_SIZE"),
    ("pool_size", 0, "DAGQ_POOL_SIZE"),
    ("max_deliveries", -1, "DAGQ_MAX_DELIVERIES"),
])
def test_bad_tunables_are_config_errors(option: str, value: object, variable: str) -> None:
    options: dict[str, Any] = {option: value, "connection_string": "UseDevelopmentStorage=true"}
    with pytest.raises(ConfigError, match=variable):
        open_azure_backend(f"azure://{ACCOUNT}/p123", **options)


def test_without_any_credential_the_first_request_explains_the_sign_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET",
                "AZURE_FEDERATED_TOKEN_FILE", "IDENTITY_ENDPOINT", "MSI_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")  # no az / azd / pwsh to borrow a login from
    message = _read_error(open_backend("azure://nosuchacct123/p123"))
    assert "DefaultAzureCredential" in message
    assert "Storage Blob Data Contributor" in message
    assert "DAGQ_STORE='azure://nosuchacct123/p123'" in message

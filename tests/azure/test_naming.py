"""Store URLs, derived Azure names and table-key escaping (no service needed)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dagq.backends.azure.naming import (
    escape_key,
    fold,
    parse_queues_url,
    parse_store_url,
    unescape_key,
)
from dagq.errors import ConfigError

CONTAINER_OR_QUEUE = re.compile(r"^(?=.{3,63}$)[a-z0-9]+(-[a-z0-9]+)*$")
TABLE = re.compile(r"^[A-Za-z][A-Za-z0-9]{2,62}$")
KEY_FORBIDDEN = re.compile(r"[/\\#?\x00-\x1f\x7f-\x9f]")


def test_a_store_url_gives_every_name() -> None:
    names = parse_store_url("azure://MyAcct01/ML_Prod")
    assert (names.account, names.prefix) == ("myacct01", "ml-prod")
    assert (names.state_container, names.outputs_container) == ("ml-prod-state",
                                                                "ml-prod-outputs")
    assert (names.index_table, names.records_table) == ("mlprodindex", "mlprodrecords")
    assert names.queue("completions") == "ml-prod-completions"
    assert names.queue("gpu") == "ml-prod-q-gpu"
    assert names.queue("GPU.large") == "ml-prod-q-gpu-large"
    assert names.deadletter_queue == "ml-prod-deadletter"
    assert names.logical("ml-prod-q-gpu") == "gpu"
    assert names.logical("ml-prod-completions") is None


def test_the_prefix_defaults_to_dagq() -> None:
    assert parse_store_url("azure://acct123").prefix == "dagq"
    assert parse_store_url("azure://acct123/").prefix == "dagq"


@given(st.text(min_size=1, max_size=40))
def test_every_accepted_prefix_yields_valid_azure_names(raw: str) -> None:
    try:
        names = parse_store_url(f"azure://acct123/{raw.replace('/', '_')}")
    except ConfigError:
        return
    for name in (names.state_container, names.outputs_container, names.deadletter_queue,
                 names.queue("completions"), names.queue("default")):
        assert CONTAINER_OR_QUEUE.match(name), name
    for name in (names.index_table, names.records_table):
        assert TABLE.match(name), name


@pytest.mark.parametrize(("url", "words"), [
    ("azure:///prefix", ["names no storage account"]),
    ("azure://Bad_Account!/p", ["not a storage account name"]),
    ("azure://ab/prefix", ["not a storage account name"]),
    ("azure://acct123/--", ["prefix", "3-24", "starting with a letter"]),
    ("azure://acct123/ab", ["3-24"]),
    ("azure://acct123.not_a_suffix/p", ["endpoint suffix"]),
    ("azure://acct123/1abc", ["starting with a letter"]),
    ("azure://acct123/" + "x" * 25, ["3-24"]),
    ("blob://acct123/p", ["azure://ACCOUNT/PREFIX"]),
])
def test_unusable_store_urls_are_explained(url: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        parse_store_url(url)
    message = str(err.value)
    assert "DAGQ_STORE" in message and "e.g." in message
    for word in words:
        assert word in message


def test_a_queue_name_too_long_for_azure_is_rejected() -> None:
    names = parse_store_url("azure://acct123/" + "p" * 24)
    assert len(names.queue("q" * 36)) == 63
    with pytest.raises(ConfigError, match="queue"):
        names.queue("q" * 37)
    with pytest.raises(ConfigError):
        names.queue("***")


def test_service_bus_urls() -> None:
    assert parse_queues_url("sb://my-namespace") == "my-namespace.servicebus.windows.net"
    assert parse_queues_url("sb://ns.example.net") == "ns.example.net"
    for bad in ("amqp://my-namespace", "sb://", "sb://x"):
        with pytest.raises(ConfigError, match="DAGQ_QUEUES"):
            parse_queues_url(bad)


def test_fold() -> None:
    assert fold("  ML  Prod!! v2 ") == "ml-prod-v2"


@given(st.text())
def test_escaped_keys_are_legal_and_reversible(key: str) -> None:
    escaped = escape_key(key)
    assert not KEY_FORBIDDEN.search(escaped)
    assert unescape_key(escaped) == key


@given(st.text(), st.text())
def test_escaping_preserves_prefixes(prefix: str, rest: str) -> None:
    assert escape_key(prefix + rest).startswith(escape_key(prefix))


@pytest.mark.parametrize(("url", "suffix"), [
    ("azure://acct123/p-1", "core.windows.net"),
    ("azure://acct123.core.chinacloudapi.cn/p-1", "core.chinacloudapi.cn"),
    ("azure://acct123.blob.core.usgovcloudapi.net/p-1", "core.usgovcloudapi.net"),
])
def test_the_store_url_names_the_cloud_endpoints(url: str, suffix: str) -> None:
    names = parse_store_url(url)
    assert (names.account, names.prefix, names.suffix) == ("acct123", "p-1", suffix)
    assert names.endpoint("queue") == f"https://acct123.queue.{suffix}"


def test_store_prefixes_at_and_over_the_bounds() -> None:
    assert parse_store_url("azure://acct123/abc").prefix == "abc"
    assert parse_store_url("azure://acct123/" + "x" * 24).prefix == "x" * 24
    for bad in ("ab", "x" * 25):
        with pytest.raises(ConfigError):
            parse_store_url(f"azure://acct123/{bad}")

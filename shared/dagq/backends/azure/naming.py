"""Store URLs and the Azure resource names derived from them.

``DAGQ_STORE=azure://ACCOUNT/PREFIX``: the prefix is lower-cased and every run of other
characters than letters and digits is folded to one ``-`` (leading and trailing ones are
dropped). The folded prefix ``p`` must be 3-24 characters and start with a letter, so that
every derived name obeys Azure's rules (:mod:`dagq.core.limits`):

- containers and queues: 3-63 characters, lower-case letters, digits and single hyphens,
  starting and ending with a letter or digit (``{p}-state``, ``{p}-q-{queue}``, and
  ``{p}-h-{queue}``/``{p}-l-{queue}`` for a queue's high and low priority bands);
- tables: 3-63 letters and digits, starting with a letter (``{p without hyphens}index``).

Outside the public cloud, write the account with its endpoint suffix:
``azure://ACCOUNT.core.chinacloudapi.cn/PREFIX`` (any ``ACCOUNT.SUFFIX``, or the blob host
``ACCOUNT.blob.SUFFIX``) makes the service URLs ``https://ACCOUNT.{blob,queue,table}.SUFFIX``;
``sb://`` likewise takes a full namespace host such as ``NS.servicebus.chinacloudapi.cn``.

Table keys cannot hold ``/ \\ # ?`` or control characters; :func:`escape_key` percent-encodes
them (and ``%`` itself) so any string can be a key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from dagq.core.limits import STORE_PREFIX
from dagq.core.priority import band_queue, split_band
from dagq.errors import ConfigError
from dagq.protocol.names import COMPLETIONS, DEADLETTER, EVENTS, NOTIFICATIONS

DEFAULT_PREFIX = "dagq"
PUBLIC_SUFFIX = "core.windows.net"
"""Endpoint suffix of the public Azure cloud's storage accounts."""
_SUFFIX_RE = re.compile(r"^(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,}$")
_ACCOUNT_RE = re.compile(r"^[a-z0-9]{3,24}$")
_NAMESPACE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9-]{4,48}[A-Za-z0-9]$")
_KEY_UNSAFE = re.compile(r"[%/\\#?\x00-\x1f\x7f-\x9f]")
_STORE_EXAMPLE = "e.g. DAGQ_STORE=azure://mystorageacct/ml-prod"
_BAND_LETTER = {"high": "h", "low": "l"}
"""Priority band queues (logical ``gpu~high``) are ``{p}-h-gpu`` and ``{p}-l-gpu``: as long
as ``{p}-q-gpu``, so every queue name that fits has its bands fit too."""


def fold(raw: str) -> str:
    """Lower-case ``raw`` and fold runs of non-alphanumerics to single hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", raw.lower()).strip("-")


@dataclass(frozen=True)
class StoreNames:
    """The account and every container, table and queue name of one store."""

    account: str
    """Storage account name."""
    prefix: str
    """Folded prefix ``p``."""
    suffix: str = PUBLIC_SUFFIX
    """Storage endpoint suffix (``core.windows.net`` in the public cloud)."""

    def endpoint(self, service: str) -> str:
        """URL of the account's ``blob``, ``queue`` or ``table`` service."""
        return f"https://{self.account}.{service}.{self.suffix}"

    @property
    def state_container(self) -> str:
        """Container of the state blobs."""
        return f"{self.prefix}-state"

    @property
    def outputs_container(self) -> str:
        """Container of outputs, stashed files and large inputs."""
        return f"{self.prefix}-outputs"

    @property
    def index_table(self) -> str:
        """Table of workflow index rows."""
        return f"{self.prefix.replace('-', '')}index"

    @property
    def records_table(self) -> str:
        """Table of small records (heartbeats, schedules)."""
        return f"{self.prefix.replace('-', '')}records"

    @property
    def deadletter_queue(self) -> str:
        """Storage queue that receives poison messages of every other queue."""
        return f"{self.prefix}-{DEADLETTER}"

    @property
    def task_queue_prefix(self) -> str:
        """Common start of every task queue name."""
        return f"{self.prefix}-q-"

    def queue(self, logical: str) -> str:
        """Physical queue name of the logical queue ``logical`` (``completions`` or a task
        queue); raises ``ConfigError`` when no valid name can be made from it."""
        if logical == COMPLETIONS:
            return f"{self.prefix}-completions"
        if logical in (NOTIFICATIONS, EVENTS):  # hook queues, never task queues
            return f"{self.prefix}-{logical}"
        base, band = split_band(logical)
        folded = fold(base)
        name = (self.task_queue_prefix if band == "normal"
                else f"{self.prefix}-{_BAND_LETTER[band]}-") + folded
        if not folded or len(name) > 63:
            room = 63 - len(self.task_queue_prefix)
            raise ConfigError(
                f"queue {logical!r} cannot name an Azure queue in store prefix "
                f"{self.prefix!r}: use 1-{room} letters, digits or hyphens (e.g. 'gpu')"
            )
        return name

    def logical(self, physical: str) -> str | None:
        """The logical task queue name of ``physical``, or ``None`` if it is no task queue."""
        if physical.startswith(self.task_queue_prefix):
            return physical[len(self.task_queue_prefix):] or None
        for band, letter in _BAND_LETTER.items():  # a priority band's queue
            start = f"{self.prefix}-{letter}-"
            if physical.startswith(start) and len(physical) > len(start):
                return band_queue(physical[len(start):], band)
        return None


def parse_store_url(url: str) -> StoreNames:
    """Names of the store ``azure://ACCOUNT/PREFIX``; raises ``ConfigError`` naming
    ``DAGQ_STORE`` when the URL, the account or the prefix is unusable."""
    parts = urlsplit(url)
    if parts.scheme != "azure":
        raise ConfigError(
            f"DAGQ_STORE={url!r}: the Azure backend needs an 'azure://ACCOUNT/PREFIX' URL "
            f"({_STORE_EXAMPLE})"
        )
    host = (parts.netloc or "").lower()
    account, _, suffix = host.partition(".")
    if suffix.split(".", 1)[0] in ("blob", "queue", "table"):
        suffix = suffix.split(".", 1)[1] if "." in suffix else ""
    suffix = suffix or PUBLIC_SUFFIX
    if not _SUFFIX_RE.match(suffix):
        raise ConfigError(
            f"DAGQ_STORE={url!r}: {suffix!r} is not a storage endpoint suffix (write "
            f"azure://ACCOUNT/PREFIX, or azure://ACCOUNT.core.chinacloudapi.cn/PREFIX outside "
            f"the public cloud; {_STORE_EXAMPLE})")
    if not account:
        raise ConfigError(
            f"DAGQ_STORE={url!r} names no storage account: write it after 'azure://' "
            f"({_STORE_EXAMPLE})"
        )
    if not _ACCOUNT_RE.match(account):
        raise ConfigError(
            f"DAGQ_STORE={url!r}: {account!r} is not a storage account name (3-24 lower-case "
            f"letters and digits; {_STORE_EXAMPLE})"
        )
    raw = parts.path.strip("/") or DEFAULT_PREFIX
    prefix = fold(raw)
    low, high = STORE_PREFIX
    if not (low <= len(prefix) <= high) or not prefix[0].isalpha():
        raise ConfigError(
            f"DAGQ_STORE={url!r}: the prefix {raw!r} cannot name Azure containers, tables and "
            f"queues (it folds to {prefix!r}). After lower-casing and folding other characters "
            f"to '-', a prefix must be {low}-{high} letters, digits and hyphens starting with a "
            "letter "
            f"({_STORE_EXAMPLE})"
        )
    return StoreNames(account=account, prefix=prefix, suffix=suffix)


def parse_queues_url(url: str) -> str:
    """The fully qualified namespace of ``sb://NAMESPACE``; raises ``ConfigError`` naming
    ``DAGQ_QUEUES`` when the URL is unusable."""
    parts = urlsplit(url)
    host = (parts.netloc or "").lower()
    example = "e.g. DAGQ_QUEUES=sb://my-namespace"
    if parts.scheme != "sb" or not host:
        raise ConfigError(
            f"DAGQ_QUEUES={url!r} is not a Service Bus URL: use 'sb://NAMESPACE' ({example}) "
            "or leave it unset to keep queues in the storage account"
        )
    if "." in host:
        return host
    if not _NAMESPACE_RE.match(host):
        raise ConfigError(
            f"DAGQ_QUEUES={url!r}: {host!r} is not a Service Bus namespace name (6-50 "
            f"letters, digits and hyphens, starting with a letter; {example})"
        )
    return f"{host}.servicebus.windows.net"


def escape_key(key: str) -> str:
    """``key`` with the characters Table keys forbid (and ``%``) percent-encoded."""
    return _KEY_UNSAFE.sub(lambda m: f"%{ord(m.group()):02X}", key)


def unescape_key(key: str) -> str:
    """Inverse of :func:`escape_key`."""
    return re.sub(r"%([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), key)

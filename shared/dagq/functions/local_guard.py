"""What a local server refuses before any handler runs: foreign ``Host`` names and
cross-site ``Origin``s.

Loopback is not a security boundary against browsers. Any page a user has open can send
a request to ``http://127.0.0.1:PORT``; the same-origin policy only stops the page from
*reading* most answers, not the request from being *made* and acted on. Two attacks follow:

* **Cross-site requests.** A page on ``https://evil.example`` posts to the local API (a
  form, or ``fetch`` with ``mode: "no-cors"``). Browsers name the page's origin in the
  ``Origin`` header of every such POST, so a state-changing request whose ``Origin`` is
  not the server's own (or one the operator allowed) is refused.
* **DNS rebinding.** ``evil.example`` first resolves to the attacker's server, then to
  127.0.0.1: the page is now "same-origin" with the local API and can read its answers.
  The browser still sends ``Host: evil.example:PORT``, so a request whose ``Host`` is a
  name the server does not answer to is refused. An IP literal cannot be rebound, so
  addresses are checked against the bound address only.

``Host`` ports are not compared: a tunnel (``ssh -L``, ``kubectl port-forward``) keeps the
name but changes the port, and a rebinding attack cannot change the name.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from dagq.protocol.http import HOST_NOT_ALLOWED, ORIGIN_NOT_ALLOWED, ErrorKind

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing; every other method is checked for its ``Origin``."""

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
"""Names that always mean this machine."""


@dataclass(frozen=True)
class Refusal:
    """Why a request was refused: the kind of error answer and a message."""

    kind: ErrorKind
    """Its HTTP status and code (``dagq.protocol.http``)."""
    message: str
    """What was refused and how to get it accepted."""


def _split_host(value: str) -> str | None:
    """The lower-cased host name (or address) of a ``Host`` value, without its port;
    None when it is not a valid ``host[:port]``."""
    value = value.strip().lower()
    if not value or any(c in value for c in "/\\@?# \t"):
        return None
    try:
        parts = urlsplit(f"http://{value}")
        host = parts.hostname
        _ = parts.port  # raises for a port that is not a number
    except ValueError:
        return None
    return host.rstrip(".") if host else None


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


@dataclass(frozen=True)
class RequestGuard:
    """The ``Host`` and ``Origin`` policy of a server bound to ``bind_host``."""

    bind_host: str = "127.0.0.1"
    """The address (or name) the server listens on."""
    allowed_hosts: frozenset[str] = frozenset()
    """More names the server answers to (``--allow-host``; ``*`` turns the check off)."""
    allowed_origins: frozenset[str] = frozenset()
    """More origins (``scheme://host[:port]``) that may send state-changing requests."""
    _own_names: frozenset[str] = field(default=frozenset(), repr=False)

    @classmethod
    def for_bind(cls, bind_host: str, allowed_hosts: Iterable[str] = (),
                 allowed_origins: Iterable[str] = ()) -> RequestGuard:
        """A guard for a server on ``bind_host``; a wildcard bind (``0.0.0.0``, ``::``)
        also answers to this machine's host names."""
        own: set[str] = set()
        addr = _address(bind_host)
        if addr is not None and addr.is_unspecified:
            for name in (socket.gethostname(), socket.getfqdn()):
                if name:
                    own.add(name.lower().rstrip("."))
        elif addr is None:
            own.add(bind_host.lower().rstrip("."))
        return cls(bind_host, frozenset(h.lower().rstrip(".") for h in allowed_hosts),
                   frozenset(o.lower().rstrip("/") for o in allowed_origins), frozenset(own))

    def host_allowed(self, host_header: str | None) -> bool:
        """True when ``Host`` names this server (an absent header is allowed: browsers
        always send one)."""
        if host_header is None or "*" in self.allowed_hosts:
            return True
        host = _split_host(host_header)
        if host is None:
            return False
        if host in LOOPBACK_NAMES or host in self.allowed_hosts or host in self._own_names:
            return True
        given = _address(host)
        if given is None:
            return False
        bound = _address(self.bind_host)
        if bound is None:
            return given.is_loopback
        if bound.is_unspecified:
            return True
        return given == bound or (bound.is_loopback and given.is_loopback)

    def origin_allowed(self, origin: str, host_header: str | None) -> bool:
        """True when ``origin`` is this server itself (same host and port as the request's
        ``Host``) or one the operator allowed. ``null`` (sandboxed frames, files) is not."""
        origin = origin.strip().lower().rstrip("/")
        if origin in self.allowed_origins:
            return True
        try:
            parts = urlsplit(origin)
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.netloc or host_header is None:
            return False
        return parts.netloc == host_header.strip().lower()

    def check(self, method: str, headers: Mapping[str, str]) -> Refusal | None:
        """Why this request must be refused, or None. ``headers`` have lower-case names."""
        host = headers.get("host")
        if not self.host_allowed(host):
            return Refusal(HOST_NOT_ALLOWED,
                           f"this server does not answer to Host {host!r}; use "
                           f"http://127.0.0.1 or http://localhost, or start dagq serve "
                           "with --allow-host NAME for a name of your own")
        origin = headers.get("origin")
        if method.upper() not in SAFE_METHODS and origin is not None \
                and not self.origin_allowed(origin, host):
            return Refusal(ORIGIN_NOT_ALLOWED,
                           f"a {method.upper()} from the web page at {origin!r} is refused "
                           "(cross-site requests cannot change anything here); call the "
                           "API from a script or the dagq CLI, or start dagq serve with "
                           "--allow-origin ORIGIN for a page you trust")
        return None

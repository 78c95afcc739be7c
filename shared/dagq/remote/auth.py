"""Credentials of the HTTP client: a function key, or an Entra ID bearer token.

- a function key goes in the ``x-functions-key`` header (``DAGQ_API_KEY``);
- a token is either given as text (``DAGQ_API_TOKEN``, e.g. from
  ``az account get-access-token --scope ...``) or obtained with azure-identity's
  ``DefaultAzureCredential`` for a scope such as ``api://<app-client-id>/.default``
  (``DAGQ_API_SCOPE``), and renewed five minutes before it expires.

Both may be set: the key is sent beside the token (a Function App whose functions keep
auth level ``function`` behind App Service Authentication needs both).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Mapping
from typing import Any

import httpx

from dagq.errors import ConfigError
from dagq.protocol.http import KEY_HEADER

RENEW_BEFORE_S = 300.0

TokenSource = str | Callable[[], str]


class EntraToken:
    """A token for ``scope`` from ``DefaultAzureCredential`` (or ``credential``), cached."""

    def __init__(self, scope: str, credential: Any = None) -> None:
        self.scope = scope
        self._credential = credential
        self._token = ""
        self._expires = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            if time.time() > self._expires - RENEW_BEFORE_S:
                access = self._get_credential().get_token(self.scope)
                self._token, self._expires = access.token, float(access.expires_on)
            return self._token

    def _get_credential(self) -> Any:
        if self._credential is None:
            try:
                from azure.identity import DefaultAzureCredential
            except ImportError:
                raise ConfigError("DAGQ_API_SCOPE needs azure-identity: pip install "
                                  "'dagq[azure]' (or give a token in DAGQ_API_TOKEN)") from None
            self._credential = DefaultAzureCredential()
        return self._credential


class ApiAuth(httpx.Auth):
    """Adds the key header and/or the bearer token to every request."""

    def __init__(self, key: str | None = None, token: TokenSource | None = None) -> None:
        self.key = key
        self.token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        """httpx's hook: set the headers, send once."""
        if self.key:
            request.headers[KEY_HEADER] = self.key
        if self.token:
            value = self.token if isinstance(self.token, str) else self.token()
            request.headers["Authorization"] = f"Bearer {value}"
        yield request


def auth_from_env(env: Mapping[str, str]) -> ApiAuth:
    """``ApiAuth`` from ``DAGQ_API_KEY``, ``DAGQ_API_TOKEN`` and ``DAGQ_API_SCOPE``."""
    key = env.get("DAGQ_API_KEY") or None
    token: TokenSource | None = env.get("DAGQ_API_TOKEN") or None
    scope = env.get("DAGQ_API_SCOPE") or None
    if token and scope:
        raise ConfigError("set DAGQ_API_TOKEN or DAGQ_API_SCOPE, not both (DAGQ_API_SCOPE "
                          "fetches a token, e.g. DAGQ_API_SCOPE=api://<app-client-id>/.default)")
    if scope:
        token = EntraToken(scope)
    return ApiAuth(key, token)

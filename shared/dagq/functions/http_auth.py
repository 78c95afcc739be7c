"""Who may call the HTTP functions: a function key (default) or an Entra ID identity.

The app setting ``DAGQ_HTTP_AUTH`` chooses, for every HTTP function at once:

- ``key`` (default): auth level ``function``; the host checks the function key
  (``x-functions-key`` header or ``code`` query).
- ``entra``: auth level ``anonymous`` at the host, for a Function App whose App Service
  Authentication validates Entra ID tokens and answers 401 to anything else (see
  docs/functions.md). The host does not combine the two: with auth level ``function`` a
  request with a valid token still needs a key
  (https://github.com/Azure/azure-functions-host/issues/11394). As a second lock the
  handlers then refuse a request that App Service did not authenticate: it sets
  ``X-MS-CLIENT-PRINCIPAL-ID`` only after validating a token, and callers cannot set it
  themselves (https://learn.microsoft.com/en-us/azure/app-service/configure-authentication-user-identities).
  So an app whose authentication was switched off by mistake is closed, not open.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

import azure.functions as func

from dagq.errors import ConfigError
from dagq.functions.errors import error_response
from dagq.protocol.http import UNAUTHORIZED, WireError

AUTH_SETTING = "DAGQ_HTTP_AUTH"
PRINCIPAL_HEADER = "x-ms-client-principal-id"
HttpFunction = Callable[[func.HttpRequest], func.HttpResponse]
_LEVELS = {"key": func.AuthLevel.FUNCTION, "entra": func.AuthLevel.ANONYMOUS}


def http_auth_mode(env: Mapping[str, str]) -> str:
    """``key`` or ``entra`` from ``DAGQ_HTTP_AUTH``; ``ConfigError`` for anything else."""
    raw = (env.get(AUTH_SETTING) or "key").strip().lower()
    if raw not in _LEVELS:
        raise ConfigError(f"{AUTH_SETTING}={raw!r} is not one of key, entra "
                          f"(e.g. {AUTH_SETTING}=key for function keys)")
    return raw


def http_auth_level(env: Mapping[str, str]) -> func.AuthLevel:
    """The auth level every HTTP function is registered with."""
    return _LEVELS[http_auth_mode(env)]


def identity_guard(env: Mapping[str, str]) -> Callable[[HttpFunction], HttpFunction]:
    """A decorator for HTTP functions: with ``entra``, answer 401 to a request App Service
    did not authenticate; with ``key``, leave the function as it is."""
    if http_auth_mode(env) != "entra":
        return lambda fn: fn

    def guard(fn: HttpFunction) -> HttpFunction:
        @functools.wraps(fn)
        def checked(req: func.HttpRequest) -> func.HttpResponse:
            if not req.headers.get(PRINCIPAL_HEADER):
                return _unauthorized()
            return fn(req)

        return checked

    return guard


def _unauthorized() -> func.HttpResponse:
    return error_response(WireError(
        UNAUTHORIZED, "this API needs an Entra ID token (Authorization: Bearer ...) that App "
        "Service Authentication accepted; none reached the function"))

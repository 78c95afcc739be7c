"""Credentials of the HTTP client: which headers go out, and when a token is renewed."""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx
import pytest

from dagq.errors import ConfigError
from dagq.remote.auth import ApiAuth, EntraToken, auth_from_env
from dagq.remote.client import api_base


@dataclass
class AccessToken:
    token: str
    expires_on: int


class Credential:
    """A credential in the shape azure-identity's are (``get_token(scope)``)."""

    def __init__(self, lifetime_s: float) -> None:
        self.lifetime_s = lifetime_s
        self.calls: list[str] = []

    def get_token(self, scope: str) -> AccessToken:
        self.calls.append(scope)
        return AccessToken(f"t{len(self.calls)}", int(time.time() + self.lifetime_s))


def _headers(auth: ApiAuth) -> httpx.Headers:
    request = httpx.Request("GET", "http://127.0.0.1/api/health")
    flow = auth.auth_flow(request)
    return next(flow).headers


def test_key_and_token_headers() -> None:
    assert _headers(ApiAuth("k1"))["x-functions-key"] == "k1"
    both = _headers(ApiAuth("k1", "tok"))
    assert (both["x-functions-key"], both["authorization"]) == ("k1", "Bearer tok")
    assert "authorization" not in _headers(ApiAuth())


def test_entra_tokens_are_cached_and_renewed_before_they_expire() -> None:
    long_lived = Credential(3600)
    token = EntraToken("api://app/.default", long_lived)
    assert (token(), token()) == ("t1", "t1")
    assert long_lived.calls == ["api://app/.default"]
    short_lived = Credential(60)  # inside the five-minute renewal window
    token = EntraToken("api://app/.default", short_lived)
    assert (token(), token()) == ("t1", "t2")


def test_settings_from_the_environment() -> None:
    auth = auth_from_env({"DAGQ_API_KEY": "k", "DAGQ_API_SCOPE": "api://app/.default"})
    assert auth.key == "k" and isinstance(auth.token, EntraToken)
    assert auth_from_env({"DAGQ_API_TOKEN": "raw"}).token == "raw"
    with pytest.raises(ConfigError, match="not both"):
        auth_from_env({"DAGQ_API_TOKEN": "raw", "DAGQ_API_SCOPE": "api://app/.default"})


@pytest.mark.parametrize(("url", "base"), [
    ("http://127.0.0.1:7071", "http://127.0.0.1:7071/api"),
    ("https://app.azurewebsites.net/api/", "https://app.azurewebsites.net/api"),
    ("https://gw.example/dagq", "https://gw.example/dagq/api"),
])
def test_api_urls(url: str, base: str) -> None:
    assert api_base(url) == base


def test_a_bad_api_url_names_the_setting() -> None:
    with pytest.raises(ConfigError, match="DAGQ_API"):
        api_base("app.azurewebsites.net")

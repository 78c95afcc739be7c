"""``DAGQ_HTTP_AUTH``: function keys by default, Entra ID (App Service Authentication)
with ``entra``: the auth level the host indexes and the handlers' own identity check."""

from __future__ import annotations

import json
from pathlib import Path

import azure.functions as func
import pytest

from dagq.errors import ConfigError
from dagq.functions import build_blueprints
from dagq.functions.runtime import Runtime
from tests.functions.host import app_of


def _http_functions(env: dict[str, str]) -> dict[str, tuple[str, object]]:
    """Name -> (auth level as indexed, user function) of every HTTP function."""
    out = {}
    for f in app_of(*build_blueprints(env, Runtime(env))).get_functions():
        bindings = json.loads(f.get_function_json())["bindings"]
        trigger = [b for b in bindings if b["type"] == "httpTrigger"]
        if trigger:
            out[str(f.get_function_name())] = (trigger[0]["authLevel"], f.get_user_function())
    return out


def _get(fn: object, headers: dict[str, str]) -> func.HttpResponse:
    req = func.HttpRequest("GET", "https://app.example/api/workflows", headers=headers,
                           params={}, route_params={}, body=b"")
    resp = fn(req)  # type: ignore[operator]
    assert isinstance(resp, func.HttpResponse)
    return resp


def test_function_keys_by_default(tmp_path: Path) -> None:
    functions = _http_functions({"DAGQ_STORE": f"sqlite:{tmp_path / 'a.db'}"})
    assert functions and {level for level, _ in functions.values()} == {"FUNCTION"}
    _, list_fn = functions["list_workflows"]
    assert _get(list_fn, {}).status_code == 200  # the host checked the key


def test_entra_mode_needs_an_identity_app_service_vouched_for(tmp_path: Path) -> None:
    functions = _http_functions({"DAGQ_STORE": f"sqlite:{tmp_path / 'a.db'}",
                                 "DAGQ_HTTP_AUTH": "entra"})
    assert {level for level, _ in functions.values()} == {"ANONYMOUS"}
    for name in ("list_workflows", "list_schedules", "health"):
        _, fn = functions[name]
        refused = _get(fn, {"Authorization": "Bearer forged"})
        assert refused.status_code == 401, name
        assert json.loads(refused.get_body())["code"] == "unauthorized"
        assert _get(fn, {"X-MS-CLIENT-PRINCIPAL-ID": "5f1c-ci"}).status_code == 200, name


def test_a_bad_mode_fails_at_start_up() -> None:
    with pytest.raises(ConfigError, match=r"DAGQ_HTTP_AUTH='token'.*key, entra"):
        build_blueprints({"DAGQ_STORE": "sqlite:x.db", "DAGQ_HTTP_AUTH": "token"})

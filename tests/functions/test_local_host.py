"""Routing of ``dagq serve``'s host: templates, precedence, methods, the key and bodies."""

from __future__ import annotations

import json

import azure.functions as func
import pytest

from dagq.functions.local_host import LocalHost, http_routes, parse_template


def _app() -> func.FunctionApp:
    app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)

    def echo(name: str) -> func.HttpResponse:
        return func.HttpResponse(name, mimetype="text/plain")

    @app.function_name("by_id")
    @app.route(route="things/{id}", methods=["GET"])
    def by_id(req: func.HttpRequest) -> func.HttpResponse:
        return echo(f"by_id {req.route_params['id']} {dict(req.params)}")

    @app.function_name("special")
    @app.route(route="things/special", methods=["POST"])
    def special(req: func.HttpRequest) -> func.HttpResponse:
        return echo(f"special {req.get_body().decode()} {req.headers.get('content-type')}")

    @app.function_name("rest")
    @app.route(route="things/{id}/files/{*path}", methods=["GET"])
    def rest(req: func.HttpRequest) -> func.HttpResponse:
        return echo(f"rest {req.route_params['id']} {req.route_params['path']}")

    @app.function_name("open")
    @app.route(route="open", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
    def open_(req: func.HttpRequest) -> func.HttpResponse:
        return echo("open")

    return app


@pytest.fixture(scope="module")
def host() -> LocalHost:
    return LocalHost(http_routes(_app()), key="k")


def _call(host: LocalHost, method: str, path: str, query: dict[str, str] | None = None,
          headers: dict[str, str] | None = None, body: bytes = b"") -> tuple[int, str]:
    resp = host.dispatch(method, path, {"code": "k", **(query or {})}, headers or {}, body,
                         f"http://h{path}")
    return resp.status_code, (resp.get_body() or b"").decode()


def test_literal_segments_win_and_methods_choose(host: LocalHost) -> None:
    assert _call(host, "POST", "/api/things/special", body=b"x",
                 headers={"content-type": "text/plain"}) == (200, "special x text/plain")
    assert _call(host, "GET", "/api/things/special") == (200, "by_id special {'code': 'k'}")
    assert _call(host, "GET", "/api/Things/a%2Fb", {"q": "1"}) == (
        200, "by_id a/b {'code': 'k', 'q': '1'}")  # an encoded '/' stays in its segment
    assert _call(host, "GET", "/api/things/t/files/d/e%20f.txt") == (200, "rest t d/e f.txt")


def test_misses_are_json_404_and_405(host: LocalHost) -> None:
    for path in ("/api/things", "/api/things/t/files", "/other/things/x", "/api"):
        status, body = _call(host, "GET", path)
        assert (status, json.loads(body)["code"]) == (404, "not_found"), path
    resp = host.dispatch("DELETE", "/api/things/special", {"code": "k"}, {}, b"", "http://h")
    assert resp.status_code == 405 and resp.headers["Allow"] == "POST"


def test_the_key_is_needed_except_on_anonymous_routes(host: LocalHost) -> None:
    resp = host.dispatch("GET", "/api/things/x", {}, {}, b"", "http://h")
    assert resp.status_code == 401 and json.loads(resp.get_body())["code"] == "unauthorized"
    resp = host.dispatch("GET", "/api/things/x", {}, {"x-functions-key": "k"}, b"", "http://h")
    assert resp.status_code == 200
    assert host.dispatch("GET", "/api/open", {}, {}, b"", "http://h").status_code == 200


def test_a_catch_all_must_end_the_template() -> None:
    assert parse_template("a/{id:int}/{*rest}") == (("lit", "a"), ("param", "id"),
                                                    ("rest", "rest"))
    with pytest.raises(ValueError, match="last segment"):
        parse_template("{*rest}/more")

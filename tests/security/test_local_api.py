"""The local API refuses what a web page on another site can send: a foreign ``Host``
(DNS rebinding), a cross-site ``Origin`` on a state-changing route, and bodies whose type a
page may send without a CORS preflight (``text/plain``, or none). Over a real loopback
socket, with raw requests that set those headers exactly."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dagq.backends.registry import open_backend
from dagq.functions.http_api import http_blueprint
from dagq.functions.local_guard import RequestGuard
from dagq.functions.runtime import Runtime
from dagq.functions.schedules import schedules_blueprint
from dagq.functions.status_api import status_blueprint
from tests.functions.host import app_of
from tests.functions.loopback import serve

DEFINITION = b"name: evil\ntasks:\n  - name: a\n    kwargs: {cmd: 'touch pwned'}\n"


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[str, int, str]]:
    """``(store, port, base URL)`` of the HTTP functions served on 127.0.0.1."""
    store = f"sqlite:{tmp_path / 'x.db'}"
    runtime = Runtime({"DAGQ_STORE": store})
    app = app_of(http_blueprint(runtime), status_blueprint(runtime),
                 schedules_blueprint(runtime))
    with serve(app) as url:
        yield store, int(url.rsplit(":", 1)[1]), url
    runtime.close()


def request(port: int, method: str, path: str, headers: dict[str, str],
            body: bytes | None = None) -> tuple[int, dict[str, object] | str]:
    """One request with exactly ``headers`` (``Host`` included: none is added)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    for name, value in headers.items():
        conn.putheader(name, value)
    if body is not None:
        conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    try:
        return resp.status, json.loads(data)
    except ValueError:
        return resp.status, data.decode(errors="replace")


def workflows(store: str) -> list[str]:
    backend = open_backend(store)
    try:
        return [row.id for row in backend.index.query()]
    finally:
        backend.close()


def test_a_cross_site_text_plain_post_is_refused(api: tuple[str, int, str]) -> None:
    store, port, _ = api
    # exactly what the report saw answered 201: a foreign Host, Origin and text/plain
    status, answer = request(port, "POST", "/api/workflows", {
        "Host": f"evil.example:{port}", "Origin": "http://evil.example",
        "Content-Type": "text/plain"}, DEFINITION)
    assert status == 421 and isinstance(answer, dict) and answer["code"] == "host_not_allowed"
    # the page's own Host but a foreign Origin (a form or no-cors fetch from another site)
    status, answer = request(port, "POST", "/api/workflows", {
        "Host": f"127.0.0.1:{port}", "Origin": "http://evil.example",
        "Content-Type": "application/yaml"}, DEFINITION)
    assert status == 403 and isinstance(answer, dict) and answer["code"] == "origin_not_allowed"
    for origin in ("null", f"http://localhost:{port + 1}", f"https://127.0.0.1:{port}x"):
        status, _ = request(port, "POST", "/api/workflows", {
            "Host": f"127.0.0.1:{port}", "Origin": origin,
            "Content-Type": "application/yaml"}, DEFINITION)
        assert status == 403, origin
    for action in ("cancel", "retry"):
        status, _ = request(port, "POST", f"/api/workflows/x/{action}", {
            "Host": f"localhost:{port}", "Origin": "https://evil.example"}, b"")
        assert status == 403
    assert workflows(store) == []


def test_a_foreign_host_cannot_read_answers(api: tuple[str, int, str]) -> None:
    _, port, _ = api
    for host in (f"evil.example:{port}", "evil.example", f"10.1.2.3:{port}", "", "a b"):
        status, _ = request(port, "GET", "/api/workflows", {"Host": host})
        assert status == 421, host
    status, _ = request(port, "GET", "/api/status", {"Host": f"evil.example:{port}"})
    assert status == 421
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", "127.0.0.1:8080",
                 f"[::1]:{port}", "LOCALHOST"):
        status, answer = request(port, "GET", "/api/workflows", {"Host": host})
        assert status == 200 and isinstance(answer, dict) and answer["workflows"] == [], host


def test_bodies_a_page_may_send_cross_site_are_refused(api: tuple[str, int, str]) -> None:
    store, port, _ = api
    own = {"Host": f"127.0.0.1:{port}"}
    status, answer = request(port, "POST", "/api/workflows", own, DEFINITION)  # no type
    assert status == 415 and isinstance(answer, dict)
    assert "without a Content-Type" in str(answer["error"])
    for kind in ("text/plain", "text/plain; charset=utf-8", "multipart/form-data; boundary=x",
                 "application/x-www-form-urlencoded"):
        status, _ = request(port, "POST", "/api/workflows", {**own, "Content-Type": kind},
                            DEFINITION)
        assert status == 415, kind
        status, _ = request(port, "POST", "/api/workflows/validate",
                            {**own, "Content-Type": kind}, DEFINITION)
        assert status == 415, kind
    schedule = json.dumps({"name": "s", "cron": "* * * * *",
                           "definition": {"name": "e", "tasks": [
                               {"name": "a", "kwargs": {"cmd": "true"}}]}}).encode()
    status, _ = request(port, "POST", "/api/schedules", own, schedule)
    assert status == 415
    status, _ = request(port, "POST", "/api/schedules", {**own, "Content-Type": "text/plain"},
                        schedule)
    assert status == 415
    assert workflows(store) == []


def test_the_servers_own_pages_and_scripts_are_served(api: tuple[str, int, str]) -> None:
    store, port, _ = api
    same = {"Host": f"127.0.0.1:{port}", "Origin": f"http://127.0.0.1:{port}"}
    status, answer = request(port, "POST", "/api/workflows",
                             {**same, "Content-Type": "application/yaml"}, DEFINITION)
    assert status == 201 and isinstance(answer, dict)
    status, _ = request(port, "POST", "/api/workflows",
                        {"Host": f"localhost:{port}", "Content-Type": "application/json"},
                        json.dumps({"name": "j", "tasks": [
                            {"name": "a", "kwargs": {"cmd": "true"}}]}).encode())
    assert status == 201  # a script (no Origin) with a JSON body
    status, page = request(port, "GET", "/api/status", {"Host": f"localhost:{port}"})
    assert status == 200 and isinstance(page, str) and "<html" in page.lower()
    assert len(workflows(store)) == 2


@pytest.mark.parametrize(("bind", "host", "allowed"), [
    ("127.0.0.1", "127.0.0.1:1", True), ("127.0.0.1", "127.0.0.2", True),
    ("127.0.0.1", "192.168.1.5", False), ("127.0.0.1", "rebind.example", False),
    ("127.0.0.1", "localhost.", True), ("127.0.0.1", "x@localhost", False),
    ("127.0.0.1", "localhost:notaport", False), ("::1", "[::1]:9", True),
    ("10.0.0.7", "10.0.0.7:7071", True), ("10.0.0.7", "10.0.0.8", False),
    ("0.0.0.0", "10.9.9.9:80", True), ("0.0.0.0", "rebind.example", False),
    ("dagq.internal", "dagq.internal:80", True), ("dagq.internal", "other.internal", False),
])
def test_host_rules(bind: str, host: str, allowed: bool) -> None:
    assert RequestGuard.for_bind(bind).host_allowed(host) is allowed


def test_configured_names_and_origins() -> None:
    guard = RequestGuard.for_bind("127.0.0.1", ["dagq.lab.example"], ["https://dash.example"])
    assert guard.host_allowed("dagq.lab.example:443")
    assert guard.check("POST", {"host": "dagq.lab.example", "origin": "https://dash.example"}) \
        is None
    assert guard.check("POST", {"host": "dagq.lab.example", "origin": "https://x.example"})
    assert guard.check("GET", {"host": "localhost", "origin": "https://x.example"}) is None
    assert RequestGuard.for_bind("127.0.0.1", ["*"]).host_allowed("anything.example")


def test_the_status_page_cannot_be_framed_or_leak_its_key(api: tuple[str, int, str]) -> None:
    _, _, url = api
    resp = httpx.get(f"{url}/api/status?code=k", timeout=30)
    assert resp.status_code == 200
    assert "frame-ancestors 'none'" in resp.headers["content-security-policy"]
    assert resp.headers["x-frame-options"] == "DENY"
    assert resp.headers["referrer-policy"] == "no-referrer"


def test_a_query_parameter_given_twice_is_refused(api: tuple[str, int, str]) -> None:
    store, port, _ = api
    status, answer = request(port, "POST", '/api/workflows?params={"a":1}&params={"a":2}', {
        "Host": f"127.0.0.1:{port}", "Content-Type": "application/yaml"}, DEFINITION)
    assert status == 400 and isinstance(answer, dict) and "more than once" in str(answer["error"])
    assert workflows(store) == []

"""``dagq serve`` itself: short keys and malformed origins are refused at start, the Host
and Origin checks are on for the address it binds, and ``--allow-host`` widens them."""

from __future__ import annotations

from tests.e2e.api import serve
from tests.e2e.harness import Dagq
from tests.security.test_local_api import request


def test_short_keys_and_bad_origins_are_refused(dagq: Dagq) -> None:
    for args, words in ((("--key", "x"), "at least 16"),
                        (("--key", "short-key-123"), "at least 16"),
                        (("--key", " padded-key-0123456789 "), "printable ASCII"),
                        (("--allow-origin", "evil.example"), "not an origin")):
        res = dagq.run("serve", "--port", "0", *args)
        assert res.returncode == 2 and words in res.stderr, (args, res.stderr)
        assert "Traceback" not in res.stderr


def test_dagq_serve_checks_host_and_origin(dagq: Dagq) -> None:
    served = serve(dagq, "--allow-host", "dagq.lab.example",
                   "--allow-origin", "https://dash.example")
    port = int(served.url.rsplit(":", 1)[1].split("/")[0])
    body = b"name: w\ntasks:\n  - name: a\n    kwargs: {cmd: 'true'}\n"
    assert request(port, "GET", "/api/workflows", {"Host": f"evil.example:{port}"})[0] == 421
    assert request(port, "GET", "/api/workflows", {"Host": "dagq.lab.example"})[0] == 200
    assert request(port, "POST", "/api/workflows", {
        "Host": f"127.0.0.1:{port}", "Origin": "https://evil.example",
        "Content-Type": "application/yaml"}, body)[0] == 403
    assert request(port, "POST", "/api/workflows", {
        "Host": "dagq.lab.example", "Origin": "https://dash.example",
        "Content-Type": "application/yaml"}, body)[0] == 201

"""A loopback HTTP server that plays the Functions host for HTTP-triggered functions:
it matches each request against the routes the functions declare (``/api`` prefix) and
calls their handlers with ``func.HttpRequest`` objects, so a real browser or HTTP client
can talk to the blueprints."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import azure.functions as func


def _routes(app: func.FunctionApp) -> list[tuple[re.Pattern[str], set[str], Any, int]]:
    out = []
    for f in app.get_functions():
        binding = next(b for b in json.loads(f.get_function_json())["bindings"]
                       if b["type"] == "httpTrigger")
        parts = binding["route"].split("/")
        regex = "/".join(f"(?P<{p[1:-1]}>[^/]+)" if p.startswith("{") else re.escape(p)
                         for p in parts)
        literal = sum(not p.startswith("{") for p in parts)
        out.append((re.compile(f"^{regex}$"), {m.upper() for m in binding["methods"]},
                    f.get_user_function(), literal))
    out.sort(key=lambda r: -r[3])  # literal segments win over parameters, like the host
    return out


@contextmanager
def serve(app: func.FunctionApp) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 (a free port) in a thread; yields the base URL."""
    routes = _routes(app)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _handle(self) -> None:
            url = urlsplit(self.path)
            path = unquote(url.path)
            if not path.startswith("/api/"):
                self.send_error(404)
                return
            path = path[len("/api/"):]
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            for regex, methods, fn, _ in routes:
                m = regex.match(path)
                if m and self.command in methods:
                    req = func.HttpRequest(self.command, f"http://127.0.0.1/api/{path}",
                                           headers=dict(self.headers.items()),
                                           params=dict(parse_qsl(url.query)),
                                           route_params=m.groupdict(), body=body)
                    resp = fn(req)
                    data = resp.get_body()
                    self.send_response(resp.status_code)
                    ctype = resp.mimetype + (f"; charset={resp.charset}" if resp.charset
                                             else "")
                    self.send_header("Content-Type", ctype)
                    for k, v in resp.headers.items():
                        if k.lower() not in ("content-type", "content-length"):
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
            self.send_error(404)

        do_GET = do_POST = _handle

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()

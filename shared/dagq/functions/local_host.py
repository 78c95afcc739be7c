"""Serves the HTTP functions of a ``FunctionApp`` on a local socket, as the Functions host
would: the same handlers, routes, auth levels and answers (``dagq serve``).

The route table is read from the app itself (each function's ``httpTrigger`` binding:
route template, methods, auth level), so every HTTP function a blueprint registers is
served without being listed here. A request becomes an ``azure.functions.HttpRequest``
(method, URL, headers, query, route parameters, body) and the handler's ``HttpResponse``
is written back unchanged. Route templates follow the host's syntax: literal segments,
``{name}`` (one segment, optionally ``{name:constraint}``; the constraint is not checked)
and a final catch-all ``{*name}``; literal segments take precedence over parameters, as
in ASP.NET Core routing. Functions whose auth level is not anonymous need the key, in
the ``x-functions-key`` header or the ``code`` query parameter, when one is configured.
Before any route is matched, ``local_guard`` refuses a foreign ``Host`` and a cross-site
``Origin`` (loopback is no boundary against the browser on the same machine).
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import parse_qs, unquote
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import azure.functions as func

from dagq.functions.errors import error_response
from dagq.functions.local_guard import SAFE_METHODS, RequestGuard
from dagq.protocol.http import (
    BAD_PARAMETER,
    INTERNAL,
    KEY_HEADER,
    KEY_QUERY,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    UNAUTHORIZED,
    ErrorKind,
    WireError,
)

log = logging.getLogger("dagq.functions.local_host")

Handler = Callable[[func.HttpRequest], Any]
StartResponse = Callable[[str, list[tuple[str, str]]], Any]
_PARAM = re.compile(r"^\{(\*?)([A-Za-z_]\w*)(?::[^}]*)?\}$")


@dataclass(frozen=True)
class Route:
    """One HTTP function: its route template, methods and handler."""

    name: str
    template: str
    methods: frozenset[str]
    anonymous: bool
    handler: Handler
    segments: tuple[tuple[str, str], ...]
    """``(kind, text)`` per segment: ``lit`` (lower-cased text), ``param`` or ``rest``."""

    @property
    def precedence(self) -> tuple[int, ...]:
        """Sort key: literal segments before parameters before a catch-all."""
        order = {"lit": 0, "param": 1, "rest": 2}
        return tuple(order[kind] for kind, _ in self.segments)

    def match(self, raw: list[str]) -> dict[str, str] | None:
        """Route parameters when the percent-encoded path segments ``raw`` match."""
        values: dict[str, str] = {}
        for i, (kind, text) in enumerate(self.segments):
            if kind == "rest":
                rest = "/".join(unquote(s) for s in raw[i:])
                if not rest:
                    return None
                values[text] = rest
                return values
            if i >= len(raw) or not raw[i]:
                return None
            value = unquote(raw[i])
            if kind == "lit" and value.lower() != text:
                return None
            if kind == "param":
                values[text] = value
        return values if len(raw) == len(self.segments) else None


def parse_template(template: str) -> tuple[tuple[str, str], ...]:
    """The segments of a route template; ``ValueError`` for a catch-all not at the end."""
    out: list[tuple[str, str]] = []
    parts = template.strip("/").split("/")
    for i, seg in enumerate(parts):
        m = _PARAM.match(seg)
        if m is None:
            out.append(("lit", seg.lower()))
        elif m.group(1):
            if i != len(parts) - 1:
                raise ValueError(f"route {template!r}: a catch-all must be the last segment")
            out.append(("rest", m.group(2)))
        else:
            out.append(("param", m.group(2)))
    return tuple(out)


def http_routes(app: func.FunctionApp) -> list[Route]:
    """Every HTTP-triggered function of ``app``, most specific route first."""
    routes = []
    for fn in app.get_functions():
        spec = json.loads(fn.get_function_json())
        for binding in spec.get("bindings", []):
            if binding.get("type") != "httpTrigger":
                continue
            template = str(binding.get("route") or fn.get_function_name())
            methods = frozenset(m.upper() for m in binding.get("methods") or ["GET", "POST"])
            anonymous = str(binding.get("authLevel", "FUNCTION")).upper() == "ANONYMOUS"
            routes.append(Route(str(fn.get_function_name()), template, methods, anonymous,
                                fn.get_user_function(), parse_template(template)))
    return sorted(routes, key=lambda r: r.precedence)


def _error(kind: ErrorKind, message: str,
           headers: Iterable[tuple[str, str]] = ()) -> func.HttpResponse:
    return error_response(WireError(kind, message), dict(headers))


class LocalHost:
    """A WSGI application serving ``routes`` under ``/{prefix}``."""

    def __init__(self, routes: list[Route], *, key: str | None = None, prefix: str = "api",
                 max_body_bytes: int = 16 * 1024 * 1024,
                 guard: RequestGuard | None = None) -> None:
        self.routes = routes
        self.key = key
        self.guard = guard or RequestGuard()
        self.prefix = prefix.strip("/")
        self.max_body_bytes = max_body_bytes

    def dispatch(self, method: str, raw_path: str, query: Mapping[str, str],
                 headers: Mapping[str, str], body: bytes, url: str) -> func.HttpResponse:
        """The answer to one request (never raises)."""
        refusal = self.guard.check(method, headers)
        if refusal is not None:
            log.warning("refused %s %s: %s", method, raw_path, refusal.message)
            return _error(refusal.kind, refusal.message)
        segments = raw_path.strip("/").split("/")
        if self.prefix:
            if not segments or segments[0].lower() != self.prefix:
                return _error(NOT_FOUND, f"no route {raw_path}: routes start with "
                              f"/{self.prefix}/ (e.g. /{self.prefix}/workflows)")
            segments = segments[1:]
        allowed: set[str] = set()
        closest: tuple[tuple[str, str], ...] | None = None
        for route in self.routes:
            params = route.match(segments)
            if params is None:
                continue
            if method not in route.methods:
                # 405's Allow names the methods of the most specific template that matched
                if closest in (None, route.segments):
                    closest = route.segments
                    allowed |= route.methods
                continue
            if not route.anonymous and not self._authorized(headers, query):
                return _error(UNAUTHORIZED, "this API needs its key: send it in the "
                              f"{KEY_HEADER} header (or the code query parameter)")
            req = func.HttpRequest(method, url, headers=dict(headers), params=dict(query),
                                   route_params=params, body=body)
            try:
                resp = route.handler(req)
            except Exception:  # the handlers answer every error themselves; this is a bug
                log.exception("function %s raised", route.name)
                return _error(INTERNAL, "internal error; the server log has the details")
            if isinstance(resp, func.HttpResponse):
                return resp
            log.error("function %s returned %r, not an HttpResponse", route.name, type(resp))
            return _error(INTERNAL, "internal error; the server log has the details")
        if allowed:
            return _error(METHOD_NOT_ALLOWED, f"{method} is not allowed on {raw_path}; "
                          f"use {', '.join(sorted(allowed))}",
                          [("Allow", ", ".join(sorted(allowed)))])
        return _error(NOT_FOUND, f"no route {raw_path}")

    def _authorized(self, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        if self.key is None:
            return True
        given = headers.get(KEY_HEADER) or query.get(KEY_QUERY) or ""
        return hmac.compare_digest(given.encode(), self.key.encode())

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        """The WSGI entry point."""
        headers = {k[5:].replace("_", "-").lower(): str(v) for k, v in environ.items()
                   if k.startswith("HTTP_")}
        for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            if environ.get(key):
                headers[key.replace("_", "-").lower()] = str(environ[key])
        raw = str(environ.get("dagq.raw_path") or environ.get("PATH_INFO") or "/")
        parsed = parse_qs(str(environ.get("QUERY_STRING") or ""), keep_blank_values=True)
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        repeated = sorted(k for k, v in parsed.items() if len(v) > 1)
        if repeated and method not in SAFE_METHODS:  # which one was meant? refuse to guess
            return self._write(_error(BAD_PARAMETER,
                                      f"query parameter {repeated[0]} is given more than "
                                      "once; give it once"), start_response)
        query = {k: v[0] for k, v in parsed.items()}
        declared = headers.get("content-length", "")
        size = int(declared) if declared.isdigit() else 0
        # an oversized body is left unread: the handler answers 413 from the declared length
        body = environ["wsgi.input"].read(size) if 0 < size <= self.max_body_bytes else b""
        host = headers.get("host") or f"{environ.get('SERVER_NAME')}:{environ.get('SERVER_PORT')}"
        qs = environ.get("QUERY_STRING")
        url = f"{environ.get('wsgi.url_scheme', 'http')}://{host}{raw}" + (f"?{qs}" if qs else "")
        resp = self.dispatch(str(environ.get("REQUEST_METHOD", "GET")).upper(), raw, query,
                             headers, body, url)
        return self._write(resp, start_response)

    @staticmethod
    def _write(resp: func.HttpResponse, start_response: StartResponse) -> list[bytes]:
        data = resp.get_body() or b""
        out = [(k, v) for k, v in resp.headers.items() if k.lower() != "content-type"]
        mimetype = resp.mimetype or "application/octet-stream"
        textual = mimetype.startswith("text/") or mimetype.endswith("json")
        out.append(("Content-Type",
                    f"{mimetype}; charset={resp.charset}" if textual and resp.charset
                    else mimetype))
        if not any(k.lower() == "content-length" for k, _ in out):
            out.append(("Content-Length", str(len(data))))
        try:
            phrase = HTTPStatus(resp.status_code).phrase
        except ValueError:
            phrase = "Status"
        start_response(f"{resp.status_code} {phrase}", out)
        return [data]


class _Handler(WSGIRequestHandler):
    """Keeps the raw (percent-encoded) path for routing and logs through ``logging``."""

    def get_environ(self) -> dict[str, Any]:
        env = super().get_environ()
        env["dagq.raw_path"] = self.path.split("?", 1)[0]
        if self.headers.get("content-type") is None:
            # wsgiref fills in text/plain for a request that names no type; keep it absent
            env.pop("CONTENT_TYPE", None)
        return env

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


def make_local_server(app: LocalHost, host: str, port: int) -> WSGIServer:
    """A threaded HTTP server for ``app`` bound to ``host:port`` (port 0: any free one)."""
    return make_server(host, port, app, server_class=_ThreadingServer, handler_class=_Handler)

"""``dagq serve``: the Function App's HTTP API on a local socket, over any store."""

from __future__ import annotations

import ipaddress
import os
import re
import signal
import sys
import threading

import click

from dagq.cli.common import handle_errors, settings_from, store_option
from dagq.errors import ConfigError

DEFAULT_PORT = 7071
"""The port a local Functions host (``func start``) listens on, so URLs are the same."""

MIN_KEY_LENGTH = 16
"""The shortest ``--key`` accepted: a short key can be guessed by anyone who can connect."""


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but loopback needs --key.")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
              help="Port (0: any free port, printed at start).")
@click.option("--key", envvar="DAGQ_API_KEY", default=None, metavar="KEY",
              help="Require this key (x-functions-key header or code query) [DAGQ_API_KEY].")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Also answer to this Host name (repeatable; requests naming any other "
                   "name are refused, against DNS rebinding).")
@click.option("--allow-origin", "allow_origins", multiple=True, metavar="ORIGIN",
              help="Also accept state-changing requests from web pages of this origin, "
                   "e.g. https://dash.example (repeatable).")
@store_option
@click.pass_context
@handle_errors
def serve(ctx: click.Context, host: str, port: int, key: str | None,
          allow_hosts: tuple[str, ...], allow_origins: tuple[str, ...],
          store: str | None) -> None:
    """Serve the HTTP API (same handlers and routes as the Function App) until SIGTERM.

    Only the HTTP functions run here: run `dagq coordinator` and workers on the same store
    to make submitted workflows progress. Requests naming another Host, and
    state-changing requests from web pages of other origins, are refused (see the threat
    model in docs/reliability.md).
    """
    from dagq.functions import build_app
    from dagq.functions.local_guard import RequestGuard
    from dagq.functions.local_host import LocalHost, http_routes, make_local_server
    from dagq.functions.runtime import Runtime

    if not is_loopback(host) and not key:
        raise click.UsageError(f"--host {host} makes the API reachable from other machines; "
                               "give it a key with --key KEY (or DAGQ_API_KEY)")
    check_key(key)
    for origin in allow_origins:
        if not re.fullmatch(r"https?://[^/\s]+", origin.strip().rstrip("/")):
            raise click.UsageError(f"--allow-origin {origin!r} is not an origin; give "
                                   "scheme://host[:port], e.g. https://dash.example")
    settings = settings_from(ctx, store)
    env = {**os.environ, "DAGQ_STORE": settings.store, "DAGQ_COORDINATOR_TRIGGER": "none",
           "DAGQ_HTTP_AUTH": "key"}  # the key check is this server's own (--key)
    runtime = Runtime(env)
    runtime.backend()  # a bad or unreachable store fails here, before anything listens
    routes = http_routes(build_app(env, runtime))
    guard = RequestGuard.for_bind(host, allow_hosts, allow_origins)
    app = LocalHost(routes, key=key or None, max_body_bytes=settings.max_request_bytes,
                    guard=guard)
    try:
        server = make_local_server(app, host, port)
    except OSError as exc:
        runtime.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc} "
                          "(choose another --port, or --port 0 for any free one)") from None
    stop = threading.Event()

    def shut_down(*_: object) -> None:
        if not stop.is_set():
            stop.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, shut_down)
    signal.signal(signal.SIGINT, shut_down)
    bound_host, bound_port = server.server_address[:2]
    click.echo(f"dagq API on http://{bound_host!s}:{bound_port}/api ({len(routes)} routes, "
               f"store {settings.store}, key {'required' if key else 'not required'})",
               err=True)
    sys.stderr.flush()
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    runtime.close()
    click.echo("dagq API stopped", err=True)


def check_key(key: str | None) -> None:
    """Refuse a key that is too short or holds characters a header cannot carry."""
    if not key:
        return
    if len(key) < MIN_KEY_LENGTH:
        raise click.UsageError(
            f"--key is {len(key)} characters long; use at least {MIN_KEY_LENGTH} (a random "
            "one: python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    if not key.isprintable() or not key.isascii() or key != key.strip():
        raise click.UsageError("--key must be printable ASCII without surrounding spaces "
                               "(it travels in an HTTP header)")


COMMANDS = (serve,)
"""The commands this module adds to ``dagq``."""

"""``dagq serve``: the Function App's HTTP API on a local socket, over any store."""

from __future__ import annotations

import ipaddress
import os
import signal
import sys
import threading

import click

from dagq.cli.common import handle_errors, settings_from, store_option
from dagq.errors import ConfigError

DEFAULT_PORT = 7071
"""The port a local Functions host (``func start``) listens on, so URLs are the same."""


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
@store_option
@click.pass_context
@handle_errors
def serve(ctx: click.Context, host: str, port: int, key: str | None, store: str | None) -> None:
    """Serve the HTTP API (same handlers and routes as the Function App) until SIGTERM.

    Only the HTTP functions run here: run `dagq coordinator` and workers on the same store
    to make submitted workflows progress.
    """
    from dagq.functions import build_app
    from dagq.functions.local_host import LocalHost, http_routes, make_local_server
    from dagq.functions.runtime import Runtime

    if not is_loopback(host) and not key:
        raise click.UsageError(f"--host {host} makes the API reachable from other machines; "
                               "give it a key with --key KEY (or DAGQ_API_KEY)")
    settings = settings_from(ctx, store)
    env = {**os.environ, "DAGQ_STORE": settings.store, "DAGQ_COORDINATOR_TRIGGER": "none",
           "DAGQ_HTTP_AUTH": "key"}  # the key check is this server's own (--key)
    runtime = Runtime(env)
    runtime.backend()  # a bad or unreachable store fails here, before anything listens
    routes = http_routes(build_app(env, runtime))
    app = LocalHost(routes, key=key or None, max_body_bytes=settings.max_request_bytes)
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


COMMANDS = (serve,)
"""The commands this module adds to ``dagq``."""

"""The web status page: one HTML document with its script and style inlined (no CDN, no
build step), served by the HTTP API at ``GET /api/status``."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from dagq.graph.palette import FILL


@cache
def page() -> bytes:
    """The status page with ``status.css`` and ``status.js`` inlined."""
    files = resources.files("dagq.web")
    html = files.joinpath("status.html").read_text("utf-8")
    css = files.joinpath("status.css").read_text("utf-8")
    js = files.joinpath("status.js").read_text("utf-8")
    js = js.replace("/*PALETTE*/ {}", json.dumps(FILL, sort_keys=True))
    return html.replace("/*STYLE*/", css).replace("/*SCRIPT*/", js).encode("utf-8")

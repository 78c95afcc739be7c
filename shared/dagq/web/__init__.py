"""The web status page: one HTML document with its script and style inlined (no CDN, no
build step), served by the HTTP API at ``GET /api/status``. Its script is the files of
``SCRIPTS`` in that order, as one ``<script>``."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from dagq.graph.palette import FILL

SCRIPTS = ("actions.js", "timeline.js", "status.js")
"""The page's script files: its action buttons, its timeline, then the page and its views
(which starts the page once every file above is loaded)."""


@cache
def page() -> bytes:
    """The status page with ``status.css`` and the ``SCRIPTS`` inlined."""
    files = resources.files("dagq.web")
    html = files.joinpath("status.html").read_text("utf-8")
    css = files.joinpath("status.css").read_text("utf-8")
    js = "\n".join(files.joinpath(name).read_text("utf-8") for name in SCRIPTS)
    js = js.replace("/*PALETTE*/ {}", json.dumps(FILL, sort_keys=True))
    return html.replace("/*STYLE*/", css).replace("/*SCRIPT*/", js).encode("utf-8")

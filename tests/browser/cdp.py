"""Headless Chromium driven over the DevTools protocol with the standard library only
(a minimal WebSocket client): open a page, evaluate JavaScript, wait for a condition,
take a screenshot."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--remote-debugging-port=0", "--window-size=1400,900", "about:blank"]


class _Socket:
    """Just enough RFC 6455 for the DevTools protocol (text frames, client masking)."""

    def __init__(self, url: str) -> None:
        rest = url.split("://", 1)[1]
        host, _, path = rest.partition("/")
        name, _, port = host.partition(":")
        self.sock = socket.create_connection((name, int(port)), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError(f"WebSocket upgrade refused: {head!r}")

    def send(self, text: str) -> None:
        data = text.encode()
        n = len(data)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                                bytes([0x80 | 126]) + n.to_bytes(2, "big") if n < 65536 else
                                bytes([0x80 | 127]) + n.to_bytes(8, "big"))
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("DevTools connection closed")
            buf += chunk
        return bytes(buf)

    def recv(self) -> str:
        parts = []
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = int.from_bytes(self._exact(2), "big")
            elif n == 127:
                n = int.from_bytes(self._exact(8), "big")
            parts.append(self._exact(n))
            if b0 & 0x80:
                return b"".join(parts).decode()


class Browser:
    """One headless Chromium with one page."""

    def __init__(self, binary: str, extra_flags: tuple[str, ...] = ()) -> None:
        self.profile = tempfile.mkdtemp(prefix="dagq-chromium-")
        self.proc = subprocess.Popen([binary, *extra_flags, *FLAGS,
                                      f"--user-data-dir={self.profile}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        port_file = Path(self.profile) / "DevToolsActivePort"
        end = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > end or self.proc.poll() is not None:
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
            pages = [p for p in json.load(r) if p["type"] == "page"]
        self.ws = _Socket(pages[0]["webSocketDebuggerUrl"])
        self.next_id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """One DevTools command; its result."""
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                result: dict[str, Any] = msg.get("result", {})
                return result

    def eval(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page."""
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                        awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def open(self, url: str) -> None:
        """Navigate to ``url``."""
        self.call("Page.navigate", url=url)

    def wait_for(self, expression: str, deadline_s: float = 30.0) -> Any:
        """Poll ``expression`` until it is truthy; its value."""
        end = time.monotonic() + deadline_s
        while True:
            try:
                value = self.eval(expression)
            except RuntimeError:
                value = None
            if value:
                return value
            if time.monotonic() > end:
                raise AssertionError(f"page never satisfied {expression!r}")
            time.sleep(0.05)

    def screenshot(self, path: Path) -> None:
        """Write a PNG of the viewport to ``path``."""
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        """Stop this Chromium (its own process group) and remove its profile."""
        try:
            os.killpg(self.proc.pid, 15)
            self.proc.wait(10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, 9)
        shutil.rmtree(self.profile, ignore_errors=True)

"""A webhook receiver for dagq events that checks the signature (docs/notifications.md).

    DAGQ_WEBHOOK_SECRET=change-me python examples/notify/receiver.py [PORT]
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

SECRET = os.environ["DAGQ_WEBHOOK_SECRET"].encode()
TOLERANCE_S = 300
seen: set[str] = set()  # event ids already handled: a retried delivery is ignored


def valid(timestamp: str, body: bytes, signature: str) -> bool:
    """The signature is HMAC-SHA256 of "{timestamp}.{raw body}"; refuse old timestamps."""
    try:
        if abs(time.time() - int(timestamp)) > TOLERANCE_S:
            return False
    except ValueError:
        return False
    expected = "sha256=" + hmac.new(SECRET, timestamp.encode() + b"." + body,
                                    hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if not valid(self.headers.get("X-Dagq-Timestamp", ""), body,
                     self.headers.get("X-Dagq-Signature", "")):
            self.send_response(401)
            self.end_headers()
            return
        event = json.loads(body)
        if event["id"] not in seen:
            seen.add(event["id"])
            data = event["data"]
            print(f"{event['type']}: {data['workflow_id']} ({data['counts']})", flush=True)
            for t in data["failed_tasks"]:
                print(f"  {t['task']} (attempt {t['attempt']}): {t['error']}", flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8765
    HTTPServer(("127.0.0.1", port), Receiver).serve_forever()

"""A web page on another site, in a real headless Chromium, cannot change anything through
the local API nor read it by DNS rebinding, while the status page keeps working.

``--host-resolver-rules`` makes ``evil.example`` resolve to 127.0.0.1, so the attacking
page is served from a foreign origin on this machine, and a request for
``http://evil.example:PORT`` is what a rebound page sends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from dagq.backends import open_backend
from dagq.client import WorkflowClient
from dagq.functions.http_api import http_blueprint
from dagq.functions.runtime import Runtime
from dagq.functions.status_api import status_blueprint
from tests.browser.cdp import Browser
from tests.browser.conftest import launch
from tests.browser.workloads import build_steer
from tests.functions.host import app_of
from tests.functions.loopback import serve
from tests.security.test_local_api import workflows

pytestmark = pytest.mark.slow

YAML = "name: evil\\ntasks:\\n  - name: a\\n    kwargs: {cmd: 'touch pwned'}\\n"
ATTACK = """<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="f" method="POST" enctype="text/plain" target="sink" action="API/workflows">
  <input type="hidden" name="FORMNAME" value="">
</form>
<script>
const results = {};
async function attempt(name, url, init) {
  try {
    const r = await fetch(url, init);
    results[name] = r.type === "opaque" ? "opaque" : r.status;
  }
  catch (e) { results[name] = "error " + e.message; }
}
(async () => {
  await attempt("no-cors text/plain", "API/workflows", {method: "POST", mode: "no-cors",
    headers: {"Content-Type": "text/plain"}, body: "YAML"});
  await attempt("no-cors untyped blob", "API/workflows", {method: "POST", mode: "no-cors",
    body: new Blob(["YAML"])});
  await attempt("no-cors cancel", "API/workflows/x/cancel", {method: "POST", mode: "no-cors"});
  for (const action of ["suspend", "cancel?reason=evil", "retry"]) {
    await attempt(`no-cors ${action}`, `API/workflows/steer/${action}`,
                  {method: "POST", mode: "no-cors"});
  }
  const sink = document.querySelector("iframe");
  await new Promise(done => { sink.onload = done; document.getElementById("f").submit(); });
  results["form"] = "sent";
  document.body.dataset.done = JSON.stringify(results);
})();
</script></body></html>"""


class _Attacker(BaseHTTPRequestHandler):
    page = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """``(store, API base URL, attacking page URL)``."""
    store = f"sqlite:{tmp_path_factory.mktemp('xsite') / 'x.db'}"
    build_steer(store).close()  # a running workflow the status page's buttons steer
    runtime = Runtime({"DAGQ_STORE": store})
    with serve(app_of(http_blueprint(runtime), status_blueprint(runtime))) as url:
        api = f"{url}/api"
        form_name = YAML.replace("\\n", "\n") + "#"
        page = (ATTACK.replace("API", api).replace("YAML", YAML)
                .replace("FORMNAME", form_name.replace('"', "&quot;")))
        handler = type("Attacker", (_Attacker,), {"page": page.encode()})
        attacker = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=attacker.serve_forever, daemon=True).start()
        try:
            yield store, api, f"http://evil.example:{attacker.server_address[1]}/"
        finally:
            attacker.shutdown()
            attacker.server_close()
    runtime.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Chromium resolving ``evil.example`` to this machine."""
    yield from launch("--host-resolver-rules=MAP evil.example 127.0.0.1")


def test_a_page_on_another_site_cannot_submit(browser: Browser, site: tuple[str, str, str],
                                              tmp_path: Path) -> None:
    store, _, attack = site
    browser.open(attack)
    done = browser.wait_for("document.body && document.body.dataset.done")
    assert "no-cors text/plain" in done and "form" in done and "no-cors retry" in done
    assert workflows(store) == ["steer"]
    backend = open_backend(store)
    state = WorkflowClient(backend).state("steer")  # what the page's buttons do, refused
    backend.close()
    assert (state.status, state.suspended, state.cancel_reason) == ("running", False, None)
    assert state.task_view("lint").status == "failed"


def test_a_rebound_page_cannot_read_the_api(browser: Browser, site: tuple[str, str, str]) -> None:
    _, api, _ = site
    port = api.split(":")[2].split("/")[0]
    browser.open(f"http://evil.example:{port}/api/status")
    text = browser.wait_for("document.body && document.body.innerText")
    assert "host_not_allowed" in text
    status = browser.eval("fetch('/api/workflows').then(r => r.status)")
    assert status == 421


def test_the_status_page_still_works(browser: Browser, site: tuple[str, str, str]) -> None:
    _, api, _ = site
    browser.open(f"{api}/status#/")
    browser.wait_for("document.body && document.body.dataset.ready === 'list'")

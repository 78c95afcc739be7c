"""Steering a workflow from the web status page, in headless Chromium, against a server
that needs its key (the page passes on the ``?code=`` it was opened with) and keeps its
loopback guards: suspend, resume, retry one task with its downstream (an error the API
answers is shown), retry the failed tasks, cancel with a reason. Buttons that do not apply
are disabled; the header shows ``suspended`` and the cancel reason; a queue nobody serves
shows the banner ``dagq wait`` would print; long task names are not cut in the graph.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dagq.client import WorkflowClient
from dagq.functions.http_api import http_blueprint
from dagq.functions.local_host import LocalHost, http_routes, make_local_server
from dagq.functions.runtime import Runtime
from dagq.functions.status_api import status_blueprint
from tests.browser.cdp import Browser
from tests.browser.test_status_page import ready, shots
from tests.browser.workloads import LONG_NAME, build_steer
from tests.functions.host import app_of

pytestmark = pytest.mark.slow
KEY = "page-key-0123456789"
BUTTONS = """Object.fromEntries([...document.querySelectorAll('#actions button.action')]
    .map(b => [b.dataset.action, !b.disabled]))"""


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[tuple[str, WorkflowClient]]:
    """The page's server on loopback, keyed, over a store holding the ``steer`` run."""
    store = f"sqlite:{tmp_path / 'steer.db'}"
    backend = build_steer(store)
    runtime = Runtime({"DAGQ_STORE": store})
    app = app_of(http_blueprint(runtime), status_blueprint(runtime))
    server = make_local_server(LocalHost(http_routes(app), key=KEY), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", WorkflowClient(backend)
    finally:
        server.shutdown()
        server.server_close()
        runtime.close()
        backend.close()


def click(browser: Browser, action: str) -> None:
    browser.eval(f"document.querySelector('button[data-action=\"{action}\"]').click()")


def result(browser: Browser, contains: str) -> dict[str, Any]:
    """The action's answer once it says ``contains``: its text and whether it is an error."""
    value: dict[str, Any] = browser.wait_for(f"""(() => {{
        const r = document.querySelector('#action-result');
        return r && r.textContent.includes({contains!r})
            && {{text: r.textContent, error: r.classList.contains('error')}}; }})()""")
    return value


def test_buttons_steer_the_workflow_with_the_page_key_and_show_what_the_api_said(
        browser: Browser, keyed: tuple[str, WorkflowClient], tmp_path: Path) -> None:
    url, client = keyed
    ready(browser, f"{url}/api/status?code={KEY}#/wf/steer", "workflow")
    assert browser.eval(BUTTONS) == {"cancel": True, "retry": True, "suspend": True,
                                     "resume": False}
    banner = browser.eval("document.querySelector('#banner:not([hidden])')?.innerText")
    assert "no worker serves queue 'default'" in banner and "dagq worker default" in banner

    click(browser, "suspend")
    assert not result(browser, "suspended")["error"]
    browser.wait_for("document.querySelector('#suspended')?.textContent === 'suspended'")
    assert browser.eval(BUTTONS) == {"cancel": True, "retry": True, "suspend": False,
                                     "resume": True}
    assert client.state("steer").suspended
    browser.screenshot(shots(tmp_path) / "status-actions.png")

    click(browser, "resume")
    result(browser, "resumed")
    browser.wait_for("!document.querySelector('#suspended')")
    assert not client.state("steer").suspended

    # retry one task with its downstream, from its panel: train after it is running
    browser.eval("window.confirm = () => true")
    browser.eval(f"document.querySelector('#tasks tr.row[data-task=\"{LONG_NAME}\"]').click()")
    browser.wait_for("!!document.querySelector('button[data-action=\"retry-task\"]')")
    click(browser, "retry-task")
    refused = result(browser, "running")
    assert refused["error"] and "train" in refused["text"]

    click(browser, "retry")
    assert not result(browser, "retried")["error"]
    assert client.state("steer").task_view("lint").status != "failed"

    browser.eval("window.prompt = () => 'wrong table'")
    click(browser, "cancel")
    result(browser, "cancel requested")
    browser.wait_for("document.body.dataset.status === 'cancelled'")
    reason = browser.wait_for("document.querySelector('#cancel-reason')?.innerText")
    assert "wrong table" in reason
    assert browser.eval(BUTTONS) == {"cancel": False, "retry": True, "suspend": False,
                                     "resume": False}
    assert client.state("steer").cancel_reason == "wrong table"
    assert browser.eval("document.querySelector('#banner:not([hidden])')") is None
    # the page's requests carry its key: without it the API refuses
    assert browser.eval("fetch('/api/workflows/steer/suspend', {method: 'POST'})"
                        ".then(r => r.status)") == 401


def test_a_cancel_dismissed_sends_nothing(browser: Browser,
                                          keyed: tuple[str, WorkflowClient]) -> None:
    url, client = keyed
    ready(browser, f"{url}/api/status?code={KEY}#/wf/steer", "workflow")
    browser.eval("window.prompt = () => null")
    click(browser, "cancel")
    assert browser.eval("document.querySelector('#action-result').textContent") == ""
    assert client.state("steer").status == "running"


def test_long_task_names_wrap_in_the_graph_with_the_whole_name_as_tooltip(
        browser: Browser, keyed: tuple[str, WorkflowClient]) -> None:
    url, _ = keyed
    ready(browser, f"{url}/api/status?code={KEY}#/wf/steer", "workflow")
    box = browser.eval(f"""(() => {{
        const g = document.querySelector('#graph g.node[data-task="{LONG_NAME}"]');
        const text = g.querySelector('text'), rect = g.querySelector('rect');
        return {{text: text.textContent, lines: text.querySelectorAll('tspan').length,
                 title: g.querySelector('title').textContent,
                 fits: text.getBBox().width <= rect.getBBox().width - 8
                       && text.getBBox().height <= rect.getBBox().height}}; }})()""")
    assert box["text"] == LONG_NAME and box["lines"] >= 2
    assert box["title"].startswith(LONG_NAME) and box["fits"]

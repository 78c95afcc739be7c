"""The web status page in a real headless Chromium, against the Function App's HTTP
handlers served on loopback: the workflows list, a running workflow (started and queued
tasks told apart, the banner of a queue nobody serves), a failed one with its task panel,
a 1,000-task run, and the timeline of each.

Screenshots go to the test's temporary directory, or to docs/ when
``DAGQ_UPDATE_SCREENSHOTS=1``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dagq.functions.http_api import http_blueprint
from dagq.functions.runtime import Runtime
from dagq.functions.status_api import status_blueprint
from dagq.graph.palette import FILL
from tests.browser.cdp import Browser
from tests.browser.workloads import build_wide
from tests.e2e.harness import Dagq, eventually, step
from tests.functions.host import app_of
from tests.functions.loopback import serve

pytestmark = pytest.mark.slow
DOCS = Path(__file__).resolve().parents[2] / "docs"


def shots(tmp_path: Path) -> Path:
    return DOCS if os.environ.get("DAGQ_UPDATE_SCREENSHOTS") == "1" else tmp_path


def rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Dagq, str, dict[str, str]]]:
    """A store with a coordinator and a ``default`` worker, three workflows (completed,
    failed, running with a task queued on a queue nobody serves), and the page's server."""
    d = Dagq(tmp_path_factory.mktemp("live"), base_env={"DAGQ_HEARTBEAT_INTERVAL": "1"})
    d.coordinator()
    d.worker("default", concurrency=2)
    marker = d.root / "flaky-failed-once"
    ids = {
        "story": d.submit(d.define("error-story", STORY)),
        "ok": d.submit(d.define("nightly-report", [
            {"name": "fetch", "kwargs": {"cmd": "true"}},
            {"name": "render", "depends_on": ["fetch"], "kwargs": {"cmd": "true"}},
            {"name": "flaky", "num_retries": 1,  # fails once: two attempts on the timeline
             "kwargs": {"cmd": f"if test -e {marker}; then true; else touch {marker}; "
                               "exit 1; fi"}}])),
        "failed": d.submit(d.define("train-model", [
            {"name": "data/load", "kwargs": {"cmd": "echo '{\"rows\": 42}' > $DAGQ_OUTPUT_FILE"}},
            {"name": "train", "depends_on": ["data/load"],
             "kwargs": {"cmd": "echo 'CUDA out of memory' >&2; exit 3"}},
            {"name": "publish", "depends_on": ["train"], "kwargs": {"cmd": "true"}},
            {"name": "lint", "kwargs": {"cmd": "true"}}])),
        "running": d.submit(d.define("long-job", [
            {"name": "warm-up", "kwargs": {"cmd": "true"}},
            {"name": "crunch", "depends_on": ["warm-up"], "kwargs": {"cmd": step("--sleep", 300)}},
            {"name": "render-gpu", "queue": "gpu", "kwargs": {"cmd": "true"}},
            {"name": "summary", "depends_on": ["crunch", "render-gpu"],
             "kwargs": {"cmd": "true"}}])),
    }
    d.wait_terminal(ids["ok"])
    d.wait_terminal(ids["story"])
    assert d.wait_terminal(ids["failed"])["status"] == "failed"
    eventually(lambda: d.tasks(ids["running"])["crunch"].get("phase") == "started",
               "crunch to start")
    runtime = Runtime({"DAGQ_STORE": d.store})
    app = app_of(http_blueprint(runtime), status_blueprint(runtime))
    with serve(app) as url:
        yield d, url, ids
    runtime.close()
    d.close()


STORY = [
    {"name": "boom", "kwargs": {"cmd": "echo 'shard 3'; echo 'ValueError: bad row 42' >&2; "
                                       "echo 'shard 3 done'; exit 1"}},
    {"name": "quiet", "kwargs": {"cmd": "echo 'shard 3'; exit 1"}}]
"""Two failing tasks with known output: one error summary each (issue 31, point 3)."""
SUMMARY = {"boom": "ValueError: bad row 42", "quiet": "command exited with code 1"}


def ready(browser: Browser, url: str, view: str) -> None:
    """Open ``url`` and wait until the page has drawn ``view`` for that very hash: a
    hash-only navigation keeps the page, so the previous view's marker must not count."""
    browser.open(url)
    route = "#" + url.split("#", 1)[1] if "#" in url else ""
    browser.wait_for(f"document.body.dataset.ready === {view!r}"
                     f" && document.body.dataset.route === {route!r}")


def test_the_list_shows_every_workflow_newest_first_with_status_colours(
        browser: Browser, live: tuple[Dagq, str, dict[str, str]], tmp_path: Path) -> None:
    _, url, ids = live
    ready(browser, f"{url}/api/status#/", "list")
    rows: list[dict[str, Any]] = browser.eval("""[...document.querySelectorAll('#workflows tr.row')]
        .map(r => ({id: r.dataset.id, status: r.querySelector('.badge').dataset.status,
                    colour: r.querySelector('.badge').style.backgroundColor}))""")
    assert [r["id"] for r in rows] == [ids["running"], ids["failed"], ids["ok"], ids["story"]]
    assert rows[1]["status"] == "failed" and rows[1]["colour"] == rgb(FILL["failed"])
    assert rows[2]["status"] == "completed" and rows[2]["colour"] == rgb(FILL["completed"])
    browser.screenshot(shots(tmp_path) / "status-list.png")


def nodes(browser: Browser) -> dict[str, dict[str, str]]:
    value: dict[str, dict[str, str]] = browser.eval("""Object.fromEntries(
        [...document.querySelectorAll('#graph g.node[data-task]')].map(g => [g.dataset.task,
        {status: g.dataset.status, phase: g.dataset.phase,
         fill: g.querySelector('rect').getAttribute('fill')}]))""")
    return value


def test_a_running_workflow_tells_started_from_queued_tasks(
        browser: Browser, live: tuple[Dagq, str, dict[str, str]], tmp_path: Path) -> None:
    _, url, ids = live
    ready(browser, f"{url}/api/status#/wf/{ids['running']}", "workflow")
    drawn = nodes(browser)
    assert drawn["warm-up"] == {"status": "completed", "phase": "completed",
                                "fill": FILL["completed"]}
    assert drawn["crunch"] == {"status": "running", "phase": "started", "fill": FILL["started"]}
    assert drawn["render-gpu"] == {"status": "running", "phase": "queued",
                                   "fill": FILL["queued"]}
    assert drawn["summary"]["phase"] == "pending"
    table = browser.eval("""Object.fromEntries([...document.querySelectorAll('#tasks tr.row')]
        .map(r => [r.dataset.task, r.querySelector('.badge').dataset.status]))""")
    assert table == {"warm-up": "completed", "crunch": "running", "render-gpu": "queued",
                     "summary": "pending"}
    browser.eval("document.querySelector('#graph g.node[data-task=\"render-gpu\"]')"
                 ".dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    reasons = browser.wait_for("document.querySelector('#panel:not([hidden]) #reasons')"
                               "?.innerText")
    assert "queue 'gpu' has no live worker" in reasons
    # a queued attempt has not started: no start time, no growing run time
    times = browser.wait_for("document.querySelector('#panel:not([hidden]) #panel-times')"
                             "?.innerText")
    assert times.startswith("queued for ") and "started" not in times and "took" not in times
    cells = browser.eval("""[...document.querySelector('#tasks tr.row[data-task="render-gpu"]')
        .querySelectorAll('td')].map(c => c.innerText)""")
    assert cells[4] == "" and cells[5].startswith("queued for ")
    browser.screenshot(shots(tmp_path) / "status-running.png")


def test_a_failed_workflow_opens_the_failed_task_with_its_error(
        browser: Browser, live: tuple[Dagq, str, dict[str, str]], tmp_path: Path) -> None:
    _, url, ids = live
    ready(browser, f"{url}/api/status#/wf/{ids['failed']}/task/train", "workflow")
    drawn = nodes(browser)
    assert drawn["train"]["fill"] == FILL["failed"]
    assert drawn["publish"] == {"status": "upstream_failed", "phase": "upstream_failed",
                                "fill": FILL["upstream_failed"]}
    assert drawn["lint"]["status"] == "completed"
    panel = browser.wait_for("document.querySelector('#panel:not([hidden])')?.innerText")
    assert "train" in panel and "exit" in panel.lower() and "attempt 1 failed" in panel
    browser.screenshot(shots(tmp_path) / "status-failed.png")
    browser.eval("document.querySelector('#graph g.node[data-task=\"data/load\"]')"
                 ".dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    output = browser.wait_for("document.querySelector('#panel-task')?.innerText"
                              ".startsWith('data/load') && document.querySelector('#output')"
                              ".innerText")
    assert '"rows": 42' in output


def test_a_thousand_task_run_folds_its_wide_layer_and_lists_every_task(
        browser: Browser, tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'wide.db'}"
    build_wide(store).close()
    runtime = Runtime({"DAGQ_STORE": store})
    with serve(app_of(http_blueprint(runtime), status_blueprint(runtime))) as url:
        ready(browser, f"{url}/api/status#/wf/wide-1000", "workflow")
        drawn = nodes(browser)
        group = browser.eval("""(() => { const g = document.querySelector('#graph g.group');
            return {members: g.dataset.members.split(' ').length,
                    text: g.textContent}; })()""")
        rows = browser.eval("document.querySelectorAll('#tasks tr.row').length")
        render_ms = browser.eval("Number(document.body.dataset.renderMs)")
        browser.screenshot(shots(tmp_path) / "status-1000.png")
    runtime.close()
    assert rows == 1000
    assert len(drawn) + group["members"] == 1000 and len(drawn) < 40
    failed = [n for n, v in drawn.items() if v["status"] == "failed"]
    assert len(failed) == 20 and all(drawn[n]["fill"] == FILL["failed"] for n in failed)
    assert drawn["prepare"]["fill"] == FILL["completed"]
    assert group["text"].startswith("+") and "completed" in group["text"]
    print(f"1,000-task page rendered {render_ms} ms after navigation")


def test_a_failed_attempt_reads_the_same_in_the_table_and_the_panel(
        browser: Browser, live: tuple[Dagq, str, dict[str, str]]) -> None:
    """One error summary per attempt (issue 31, point 3): the table's detail and the
    panel's error line are the summary ``dagq status``/``task``/``explain`` show, never
    the last stdout line or the generic exit line when a better one exists."""
    _, url, ids = live
    ready(browser, f"{url}/api/status#/wf/{ids['story']}", "workflow")
    details = browser.eval("""Object.fromEntries([...document.querySelectorAll('#tasks tr.row')]
        .map(r => [r.dataset.task, r.querySelector('td.detail').innerText]))""")
    assert details == SUMMARY
    for name, line in SUMMARY.items():
        browser.eval(f"document.querySelector('#tasks tr.row[data-task=\"{name}\"]').click()")
        shown = browser.wait_for(
            f"document.querySelector('#panel-task')?.innerText.startsWith({name!r})"
            " && document.querySelector('#error-line')?.innerText")
        assert shown == line
        reasons = browser.eval("document.querySelector('#reasons').innerText")
        assert "attempt 1 failed" in reasons and line in reasons


BARS = """Object.fromEntries([...document.querySelectorAll('#timeline .tl-row[data-task]')]
    .map(r => [r.dataset.task, [...r.querySelectorAll('.bar')].map(b => ({
        kind: b.classList.contains('queued') ? 'queued' : 'run', result: b.dataset.result,
        attempt: Number(b.dataset.attempt),
        colour: getComputedStyle(b).getPropertyValue('--c').trim()}))]))"""


def timeline(browser: Browser, url: str) -> dict[str, list[dict[str, Any]]]:
    """Open ``url``, switch to the timeline tab; its bars per task row."""
    ready(browser, url, "workflow")
    browser.eval("document.querySelector('.tabs button[data-view=\"timeline\"]').click()")
    browser.wait_for("!document.querySelector('#timeline').hidden"
                     " && document.querySelectorAll('#timeline .tl-row[data-task]').length")
    bars: dict[str, list[dict[str, Any]]] = browser.eval(BARS)
    return bars


def test_the_timeline_draws_each_attempt_coloured_by_result_and_queued_time_apart(
        browser: Browser, live: tuple[Dagq, str, dict[str, str]], tmp_path: Path) -> None:
    _, url, ids = live
    try:
        ok = timeline(browser, f"{url}/api/status#/wf/{ids['ok']}")
        assert [(b["attempt"], b["result"], b["colour"]) for b in ok["flaky"]
                if b["kind"] == "run"] == [(1, "failed", FILL["failed"]),
                                           (2, "succeeded", FILL["completed"])]
        failed = timeline(browser, f"{url}/api/status#/wf/{ids['failed']}")
        assert list(failed) == ["data/load", "train", "publish", "lint"]
        assert [b["result"] for b in failed["train"] if b["kind"] == "run"] == ["failed"]
        assert failed["publish"] == []  # never ran
        running = timeline(browser, f"{url}/api/status#/wf/{ids['running']}")
        assert [b["kind"] for b in running["render-gpu"]] == ["queued"]
        assert running["render-gpu"][0]["colour"] == FILL["queued"]
        assert any(b["kind"] == "run" and b["result"] == "running" for b in running["crunch"])
        ticks = browser.eval("document.querySelectorAll('#timeline .tl-axis .tick').length")
        assert ticks >= 2
        browser.screenshot(shots(tmp_path) / "status-timeline.png")
    finally:
        browser.eval("sessionStorage.removeItem('dagq-view')")


def test_a_queue_no_worker_serves_shows_a_banner_until_the_workflow_ends(
        browser: Browser, live: tuple[Dagq, str, dict[str, str]]) -> None:
    _, url, ids = live
    ready(browser, f"{url}/api/status#/wf/{ids['running']}", "workflow")
    text = browser.wait_for("document.querySelector('#banner:not([hidden])')?.innerText")
    assert "no worker serves queue 'gpu'" in text and "(render-gpu)" in text
    assert "dagq worker gpu" in text and "'default'" not in text  # default has a worker
    ready(browser, f"{url}/api/status#/wf/{ids['failed']}", "workflow")
    assert browser.eval("document.querySelector('#banner:not([hidden])')") is None


def test_the_timeline_of_a_thousand_tasks_scrolls(browser: Browser, tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'wide.db'}"
    build_wide(store).close()
    runtime = Runtime({"DAGQ_STORE": store})
    try:
        with serve(app_of(http_blueprint(runtime), status_blueprint(runtime))) as url:
            bars = timeline(browser, f"{url}/api/status#/wf/wide-1000")
            box = browser.eval("""(() => { const t = document.querySelector('#timeline');
                return {scroll: t.scrollHeight, height: t.clientHeight}; })()""")
    finally:
        browser.eval("sessionStorage.removeItem('dagq-view')")
        runtime.close()
    assert len(bars) == 1000
    assert box["scroll"] > 5 * box["height"]  # one row per task, in a scrolled box
    failed = [n for n, b in bars.items() if b and b[-1]["result"] == "failed"]
    assert len(failed) == 20

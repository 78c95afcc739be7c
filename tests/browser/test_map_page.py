"""A mapped task on the web status page, in headless Chromium: one folded row and one
graph box with its instances counted per status; a click unfolds the row into its
instances, a page at a time, and an instance opens in the task panel."""

from __future__ import annotations

from pathlib import Path

from dagq.functions.http_api import http_blueprint
from dagq.functions.runtime import Runtime
from dagq.functions.status_api import status_blueprint
from tests.browser.cdp import Browser
from tests.browser.test_status_page import nodes, ready, timeline
from tests.functions.host import app_of
from tests.functions.loopback import serve
from tests.views.maps import build_map

ROWS = "[...document.querySelectorAll('#tasks tr.row')].map(r => r.dataset.task)"


def test_a_map_is_one_folded_row_that_unfolds_into_its_instances_page_by_page(
        browser: Browser, tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'map.db'}"
    build_map(store, width=120, failed=(3, 77), running=(5,)).close()
    runtime = Runtime({"DAGQ_STORE": store})
    with serve(app_of(http_blueprint(runtime), status_blueprint(runtime))) as url:
        ready(browser, f"{url}/api/status#/wf/map-views", "workflow")
        drawn = nodes(browser)
        box = browser.eval("document.querySelector('#graph g.node[data-task=\"fit\"] text')"
                           ".textContent")
        folded = browser.eval(ROWS)
        row = browser.eval("""(() => { const r = document.querySelector('#tasks tr.map');
            return {task: r.dataset.task, items: r.dataset.map,
                    status: r.querySelector('.badge').dataset.status,
                    counts: [...r.querySelectorAll('td.detail .count')]
                        .map(c => c.textContent.trim())};
            })()""")
        browser.eval("document.querySelector('#tasks tr.map').click()")
        browser.wait_for("document.querySelectorAll('#tasks tr.instance').length === 50")
        first = browser.eval("[...document.querySelectorAll('#tasks tr.instance')]"
                             ".map(r => r.dataset.task)")
        pager = browser.eval("document.querySelector('#tasks tr.pager').textContent")
        browser.eval("document.querySelector('#tasks tr.pager button.next').click()")
        browser.wait_for("document.querySelector('#tasks tr.instance').dataset.task === 'fit[50]'")
        browser.eval("document.querySelector('#tasks tr.pager button.next').click()")
        browser.wait_for("document.querySelector('#tasks tr.instance').dataset.task === 'fit[100]'")
        last = browser.eval("[...document.querySelectorAll('#tasks tr.instance')]"
                            ".map(r => r.dataset.task)")
        browser.eval("document.querySelector('#tasks tr.instance[data-task=\"fit[103]\"]')"
                     ".click()")
        browser.wait_for("document.querySelector('#panel-task') && document.querySelector("
                         "'#panel-task').textContent.startsWith('fit[103]')")
        reasons = browser.eval("document.querySelector('#reasons').innerText")
        browser.eval("document.querySelector('#tasks tr.map').click()")
        browser.wait_for("document.querySelectorAll('#tasks tr.instance').length === 0")
        browser.screenshot(tmp_path / "status-map.png")
    runtime.close()
    assert set(drawn) == {"scan", "fit", "reduce", "audit"}  # one box, not 120
    assert drawn["fit"]["status"] == "running"
    assert box == "fit ×120 (117 ✓ 2 ✗ 1 ▶)"
    assert folded == ["scan", "fit", "reduce", "audit"]
    assert row["task"] == "fit" and row["items"] == "120" and row["status"] == "queued"
    assert row["counts"] == ["completed 117", "failed 2", "running 1"]
    assert first == [f"fit[{k}]" for k in range(50)]
    assert pager.startswith("instances 1–50 of 120")
    assert last == [f"fit[{k}]" for k in range(100, 120)]
    assert "instance 103 of map 'fit' (item: file-103.csv)" in reasons


def test_a_map_is_one_folded_timeline_row_that_unfolds_like_the_table(
        browser: Browser, tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'map.db'}"
    build_map(store, width=120, failed=(3, 77), running=(5,)).close()
    runtime = Runtime({"DAGQ_STORE": store})
    tl = "[...document.querySelectorAll('#timeline .tl-row[data-task]')]"
    try:
        with serve(app_of(http_blueprint(runtime), status_blueprint(runtime))) as url:
            folded = timeline(browser, f"{url}/api/status#/wf/map-views")
            head = browser.eval(f"{tl}.find(r => r.dataset.task === 'fit')"
                                ".querySelector('.tl-label').textContent")
            browser.eval(f"{tl}.find(r => r.dataset.task === 'fit')"
                         ".querySelector('.tl-label').click()")
            browser.wait_for(f"{tl}.filter(r => r.classList.contains('instance')).length"
                             " === 50")
            rows = browser.eval(f"{tl}.map(r => r.dataset.task)")
            table = browser.eval("document.querySelectorAll('#tasks tr.instance').length")
            bar = browser.eval(f"{tl}.find(r => r.dataset.task === 'fit[3]')"
                               ".querySelector('.bar').dataset.result")
    finally:
        browser.eval("sessionStorage.removeItem('dagq-view')")
        runtime.close()
    assert list(folded) == ["scan", "fit", "reduce", "audit"]  # one row, not 120
    assert head == "▸ fit ×120"
    assert rows[:2] == ["scan", "fit"] and rows[2:52] == [f"fit[{k}]" for k in range(50)]
    assert table == 50  # the table unfolded with it
    assert bar == "failed"

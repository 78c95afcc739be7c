"""Render time of the web status page for a 1,000-task run, in headless Chromium.

    .venv/bin/python bench/status_page_bench.py [--runs 5]

Builds the 1,000-task run of the browser tests (most shards completed, 20 failed, the
rest queued) on a temporary SQLite store, serves the Function App's HTTP handlers on
loopback, and opens ``/api/status#/wf/wide-1000`` in a fresh page each run. The figure
is the page's own ``performance.now()`` when the DAG, the task table and the header are
all in the DOM (``data-render-ms``), i.e. from navigation start, including the three API
requests and the server work behind them. Also prints the SVG's size.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dagq.functions.http_api import http_blueprint  # noqa: E402
from dagq.functions.runtime import Runtime  # noqa: E402
from dagq.functions.status_api import status_blueprint  # noqa: E402
from tests.browser.cdp import Browser  # noqa: E402
from tests.browser.workloads import build_wide  # noqa: E402
from tests.functions.host import app_of  # noqa: E402
from tests.functions.loopback import serve  # noqa: E402


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    binary = shutil.which("chromium")
    if binary is None:
        sys.exit("chromium is not installed (apt-get install -y chromium)")
    tmp = Path(tempfile.mkdtemp(prefix="dagq-bench-"))
    store = f"sqlite:{tmp / 'wide.db'}"
    build_wide(store).close()
    runtime = Runtime({"DAGQ_STORE": store})
    browser = Browser(binary)
    times: list[float] = []
    try:
        with serve(app_of(http_blueprint(runtime), status_blueprint(runtime))) as url:
            t0 = time.perf_counter()
            with urllib.request.urlopen(f"{url}/api/workflows/wide-1000/graph?format=svg") as r:
                svg = r.read()
            svg_ms = (time.perf_counter() - t0) * 1000
            for _ in range(args.runs):
                browser.open("about:blank")
                browser.open(f"{url}/api/status#/wf/wide-1000")
                browser.wait_for("document.body.dataset.ready === 'workflow'", 60)
                times.append(float(browser.eval("Number(document.body.dataset.renderMs)")))
    finally:
        browser.close()
        runtime.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"1,000-task page: render {statistics.median(times):.0f} ms median "
          f"(min {min(times):.0f}, max {max(times):.0f}, {len(times)} runs); "
          f"SVG {len(svg) / 1024:.0f} KiB served in {svg_ms:.0f} ms")


if __name__ == "__main__":
    main()

"""A bounded property-based run of the OpenAPI document against ``dagq serve``.

Schemathesis generates requests from ``openapi.json`` (valid and invalid ones, then
sequences that follow the document's links: submit, then read, cancel or retry what was
submitted) and checks every answer: no 5xx, status codes, content types, headers and
bodies as documented, invalid requests refused, the key enforced. One check is left out:
``positive_data_acceptance`` expects every schema-valid body to be accepted, but a
definition's rules (a task list that is not empty, known dependencies, no cycles) go
beyond what a JSON schema of the body can say, so a random string is schema-valid YAML
text and still, rightly, a 400. The seed is fixed so that a failure can be replayed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.api import Served, serve
from tests.e2e.harness import Dagq

pytestmark = pytest.mark.slow

KEY = "schema-test-key-0123456789"
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


@pytest.fixture
def api(dagq: Dagq) -> Iterator[Served]:
    """A coordinator, a worker and a keyed ``dagq serve`` on a fresh store."""
    dagq.coordinator()
    dagq.worker("default", concurrency=2)
    served = serve(dagq, "--key", KEY)
    yield served
    served.proc.stop()


def test_openapi_document_holds_against_dagq_serve(dagq: Dagq, api: Served) -> None:
    if not SCHEMATHESIS.exists():
        pytest.fail(f"{SCHEMATHESIS} is missing: install the dev extras (pip install -e '.[dev]')")
    res = subprocess.run(
        [str(SCHEMATHESIS), "run", f"{api.url}/openapi.json", "--url", api.url,
         "--header", f"x-functions-key: {KEY}", "--checks", "all",
         "--exclude-checks", "positive_data_acceptance", "--max-examples", "12",
         "--seed", "20261201", "--request-timeout", "230", "--no-color",
         # ?wait= long-polls up to 200 s by design; 230 s is an HTTP function's own limit
         "--max-response-time", "230"],
        capture_output=True, text=True, timeout=500, cwd=dagq.root, check=False,
        env={**os.environ, "SCHEMATHESIS_HOOKS": ""})
    report = res.stdout + res.stderr
    assert res.returncode == 0, f"schemathesis found problems:\n{report[-12000:]}"
    selected = re.search(r"Selected: (\d+)/\d+", report)
    tested = re.search(r"Tested: (\d+)", report)
    assert selected and tested and selected.group(1) == tested.group(1), report[-3000:]
    assert int(tested.group(1)) >= 17  # every route of the document was exercised
    assert "Internal Server Error" not in api.proc.text()

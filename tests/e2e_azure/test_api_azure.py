"""The HTTP API over a real loopback socket on Azurite: ``dagq serve`` on an ``azure://``
store, the CLI with ``--api`` against the CLI on the store, and ``dagq.Client``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dagq import Client
from tests.e2e.api import Served, check_cli_parity, parity_workload, serve
from tests.e2e.harness import Dagq

pytestmark = [pytest.mark.slow, pytest.mark.azurite]

DEADLINE_S = 120.0


@pytest.fixture
def api(az: Dagq) -> Iterator[Served]:
    """A coordinator, a worker and ``dagq serve`` on the test's Azurite store."""
    az.coordinator()
    az.worker("default", concurrency=3)
    served = serve(az)
    yield served
    served.proc.stop()


@pytest.mark.timeout(900)  # about 70 CLI processes; each start takes seconds on a busy machine
def test_every_cli_verb_gives_the_same_answer_over_the_api(az: Dagq, api: Served) -> None:
    check_cli_parity(az, api.url, DEADLINE_S)


def test_python_client_on_azurite(az: Dagq, api: Served, tmp_path: Path) -> None:
    with Client(api.url) as client:
        run = client.submit(parity_workload(az, "py"), workflow_id="py-az")
        assert client.wait(run.id, timeout_s=DEADLINE_S)["status"] == "failed"
        assert client.output(run.id, "make") == {"rows": 3, "tag": "x"}  # read from Blob
        assert [f["path"] for f in client.files(run.id, "make")] == ["a.txt", "sub/b c.txt"]
        client.download_files(run.id, "make", tmp_path / "dl")
        assert (tmp_path / "dl/sub/b c.txt").read_text() == "two\n"
        assert client.health()["store"] == az.store
        nap = client.submit("name: nap\ntasks:\n  - {name: nap, kwargs: {cmd: 'sleep 60'}}\n")
        assert client.wait(nap.id, timeout_s=2)["status"] in ("pending", "running")  # timed out
        client.cancel(nap.id)
        assert client.wait(nap.id, timeout_s=DEADLINE_S)["status"] == "cancelled"

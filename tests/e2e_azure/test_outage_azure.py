"""The coordinator and workers survive an Azurite restart mid-run: they back off while
the emulator is down, never exit, and every workflow finishes once it is back."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from tests.e2e.harness import Dagq, pid_alive, sh_step
from tests.e2e_azure.conftest import AZURE_ENV
from tests.fixtures.azurite import ACCOUNT, RestartableAzurite

pytestmark = [pytest.mark.slow, pytest.mark.azurite]


def test_the_coordinator_survives_an_azurite_restart(
        restartable_azurite: RestartableAzurite, tmp_path: Path) -> None:
    d = Dagq(tmp_path, base_env={
        **AZURE_ENV, "DAGQ_STORE": f"azure://{ACCOUNT}/o{uuid.uuid4().hex[:10]}",
        "DAGQ_STORAGE_CONNECTION_STRING": restartable_azurite.connection_string})
    try:
        log = tmp_path / "runs.log"
        step = sh_step(log) + "; sleep 0.5"
        path = d.define("chain", [{"name": f"s{i}", "kwargs": {"cmd": step},
                                   **({"depends_on": [f"s{i - 1}"]} if i else {})}
                                  for i in range(6)])
        ids = [d.submit(path) for _ in range(3)]
        coord = d.coordinator()
        worker = d.worker(concurrency=3)
        deadline = time.monotonic() + 120
        while (not log.exists() or len(log.read_text().splitlines()) < 3) \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        restartable_azurite.stop()  # mid-run: tasks are running and queued
        time.sleep(8)
        assert pid_alive(coord.popen.pid), coord.text()
        assert pid_alive(worker.popen.pid), worker.text()
        restartable_azurite.start()
        finals = d.wait_all_terminal(ids, deadline_s=240)
        assert {f["status"] for f in finals.values()} == {"completed"}, d.diagnostics()
        assert pid_alive(coord.popen.pid), coord.text()
        text = coord.text()
        assert "store is unavailable" in text and "available again" in text, text
        assert text.count("store is unavailable") <= 3, text  # not one line per retry
    finally:
        d.close()

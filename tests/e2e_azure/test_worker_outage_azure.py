"""A storage outage restarts nothing and loses nothing: Azurite (with its data on disk) is
stopped while a workflow runs, then started again on the same ports.

During the outage every store request fails; the worker's liveness probe
(``dagq worker QUEUE --check``) must keep passing (it reads a local file), the worker and
coordinator processes must keep running, and afterwards the workflow completes with
every task. ``DAGQ_TEST_OUTAGE_S`` sets the outage (default 20 s: longer than the
workers' visibility timeout and three heartbeat intervals, so leases lapse and
heartbeats go stale, which is what an outage of any length does; docs/workers.md
quotes a 90 s run)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import DAGQ, Dagq, eventually, executions, sh_step
from tests.e2e_azure.conftest import AZURE_ENV
from tests.fixtures.azurite import ACCOUNT, AZURITE, connection_string

pytestmark = [pytest.mark.slow, pytest.mark.azurite]

OUTAGE_S = float(os.environ.get("DAGQ_TEST_OUTAGE_S", "20"))
TASKS = 8


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DiskAzurite:
    """Azurite keeping its data in ``location``, stoppable and restartable on fixed ports."""

    def __init__(self, location: Path) -> None:
        self.location = location
        self.ports = {"Blob": _free_port(), "Queue": _free_port(), "Table": _free_port()}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [str(AZURITE), "--silent", "--disableTelemetry", "--skipApiVersionCheck",
                "--loose", "--location", str(self.location)]
        for service, port in self.ports.items():
            args += [f"--{service.lower()}Host", "127.0.0.1", f"--{service.lower()}Port",
                     str(port)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)

        def listening() -> bool:
            for port in self.ports.values():
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) != 0:
                        return False
            return True

        eventually(listening, "Azurite to listen", 60, 0.1)

    def stop(self) -> None:
        """SIGTERM (Azurite saves its data on the way out), SIGKILL if it hangs."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def outage_az(tmp_path: Path) -> Iterator[tuple[Dagq, DiskAzurite]]:
    if not AZURITE.exists() or not DAGQ.exists():
        pytest.fail("Azurite or dagq is not installed (see the README's test command)")
    azurite = DiskAzurite(tmp_path / "azurite")
    azurite.location.mkdir()
    azurite.start()
    d = Dagq(tmp_path / "run", base_env={
        **AZURE_ENV, "DAGQ_STORE": f"azure://{ACCOUNT}/outage",
        "DAGQ_STORAGE_CONNECTION_STRING": connection_string(azurite.ports)})
    d.root.mkdir()
    try:
        yield d, azurite
    finally:
        d.close()
        azurite.stop()


def test_a_storage_outage_restarts_no_worker_and_loses_no_task(
        outage_az: tuple[Dagq, DiskAzurite]) -> None:
    az, azurite = outage_az
    log = az.root / "runs.log"
    path = az.define("outage", [
        {"name": f"t{i}", "kwargs": {"cmd": "sleep 2; " + sh_step(log, v=i)}}
        for i in range(TASKS)])
    env = {"DAGQ_HEARTBEAT_INTERVAL": "1"}
    coordinator = az.coordinator(env=env)
    worker = az.worker("default", concurrency=2, env=env)
    wf = az.submit(path)
    eventually(lambda: executions(log), "a first task to start", 60)

    azurite.stop()
    end = time.monotonic() + OUTAGE_S
    probes = 0
    while time.monotonic() < end:
        res = az.run("worker", "default", "--check", timeout_s=30)
        assert res.returncode == 0, f"liveness failed during the outage: {res.stderr}"
        probes += 1
        time.sleep(2)
    assert worker.popen.poll() is None, worker.text()
    assert coordinator.popen.poll() is None, coordinator.text()
    azurite.start()

    summary = az.wait_terminal(wf, deadline_s=240)
    assert summary["status"] == "completed", az.diagnostics(wf)
    assert summary["counts"] == {"completed": TASKS}
    assert {task for _, task, _ in executions(log)} == {f"t{i}" for i in range(TASKS)}
    assert worker.popen.poll() is None and coordinator.popen.poll() is None
    assert az.run("worker", "default", "--check").returncode == 0
    assert probes >= 2
    print(f"outage {OUTAGE_S:g}s: {probes} liveness probes passed; worker and coordinator "
          f"kept running; {TASKS}/{TASKS} tasks completed")

"""A task whose every delivery kills its worker fails instead of hanging its workflow."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

DAGQ = str(Path(sys.executable).parent / "dagq")
KILL_WORKER = ("p=$PPID; grep -q supervisor /proc/$p/cmdline && p=$(cut -d' ' -f4 /proc/$p/stat)"
               "; kill -9 $p")
"""A task that SIGKILLs its worker: its parent, or its supervisor's parent."""


def test_an_attempt_that_keeps_killing_its_worker_is_failed_and_retried(tmp_path: Path) -> None:
    env = dict(os.environ, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}", DAGQ_MAX_DELIVERIES="2",
               DAGQ_VISIBILITY_TIMEOUT="1", DAGQ_IDLE_POLL="0.1", DAGQ_MAX_IDLE_BACKOFF="0.2",
               DAGQ_HEARTBEAT_INTERVAL="0.3")
    (tmp_path / "wf.yaml").write_text(
        "name: poison\ntasks:\n"
        f"  - name: oom\n    num_retries: 1\n    kwargs: {{cmd: {json.dumps(KILL_WORKER)}}}\n"
        "  - name: after\n    depends_on: [oom]\n    kwargs: {cmd: 'true'}\n")
    wf_id = subprocess.run([DAGQ, "submit", str(tmp_path / "wf.yaml")], env=env, check=True,
                           capture_output=True, text=True).stdout.strip()
    coord = subprocess.Popen([DAGQ, "coordinator"], env=env, start_new_session=True,
                             stderr=subprocess.DEVNULL)
    workers_started = 0
    try:
        deadline = time.monotonic() + 90
        while True:
            status = json.loads(subprocess.run(
                [DAGQ, "status", wf_id, "--json"], env=env, check=True, capture_output=True,
                text=True).stdout)
            if status["status"] in ("completed", "failed", "cancelled"):
                break
            assert time.monotonic() < deadline, f"workflow stuck: {status}"
            worker = subprocess.run([DAGQ, "worker", "default", "--idle-timeout", "2"],
                                    env=env, capture_output=True, text=True, timeout=60)
            workers_started += 1
            assert worker.returncode in (0, -signal.SIGKILL), worker.stderr
    finally:
        coord.send_signal(signal.SIGTERM)
        coord.wait(timeout=30)
    assert status["status"] == "failed"
    tasks = {t["name"]: t for t in json.loads(subprocess.run(
        [DAGQ, "tasks", "--workflow", wf_id, "--json"], env=env, check=True,
        capture_output=True, text=True).stdout)}
    assert tasks["oom"]["status"] == "failed"
    assert tasks["oom"]["attempt"] == 2  # the give-up counted as a failed attempt: retried once
    assert "delivered 2 times without finishing" in tasks["oom"]["error"]
    assert tasks["after"]["status"] == "upstream_failed"
    # each attempt killed a worker on its first delivery; its second was given up
    assert workers_started >= 3

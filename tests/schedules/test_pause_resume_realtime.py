"""Pause and resume against the real clock, through ``dagq scheduler`` and the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
DAGQ = str(Path(sys.executable).parent / "dagq")


def test_fire_times_during_a_pause_are_recorded_as_missed_not_run(tmp_path: Path) -> None:
    env = dict(os.environ, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}")

    def dagq(*args: str) -> str:
        out = subprocess.run([DAGQ, *args], env=env, capture_output=True, text=True,
                             timeout=60, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        return out.stdout

    (tmp_path / "wf.yaml").write_text("name: tick\ntasks:\n- {name: a, kind: noop}\n")
    dagq("schedule", "add", "every-second", "wf.yaml", "--cron", "* * * * * *",
         "--catchup", "all", "--overlap", "allow")
    ticker = subprocess.Popen([DAGQ, "scheduler", "--interval", "0.2"], env=env,
                              cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(2.5)
        dagq("schedule", "pause", "every-second")
        paused_at = time.time()
        time.sleep(3.0)
        dagq("schedule", "resume", "every-second")
        resumed_at = time.time()
        time.sleep(2.5)
    finally:
        os.killpg(ticker.pid, signal.SIGTERM)
        ticker.wait(timeout=30)
    info = json.loads(dagq("schedule", "show", "every-second", "--json"))

    def epoch(text: str) -> float:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()

    ran = [epoch(r["fire_time"]) for r in info["runs"]]
    paused = [epoch(m["fire_time"]) for m in info["missed"] if m["reason"] == "paused"]
    assert len(paused) >= 2, info["missed"]
    assert all(paused_at - 1 <= t <= resumed_at + 1 for t in paused)
    # nothing that passed during the pause ran, before or after the resume
    assert not [t for t in ran if paused_at + 1 < t < resumed_at - 1], info["runs"]
    assert any(t > resumed_at for t in ran), info["runs"]  # and it fires again

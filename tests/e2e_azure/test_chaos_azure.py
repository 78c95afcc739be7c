"""Chaos on Azurite (Storage queues, which never de-duplicate): coordinators killed right
after sending dispatches and before clearing them from the outbox, four times during a
150-task fan-out. Every restart re-sends the fan-out, so copies of attempts that are
running or finished reach the workers; the claim check must run each attempt once."""

from __future__ import annotations

import json
import re
import signal
import time
from collections import Counter

import pytest

from tests.e2e.harness import Dagq, eventually, executions, sh_step

pytestmark = [pytest.mark.slow, pytest.mark.azurite]

FANS = 150
KILLS = 4
DOOMED_ENV = {"DAGQ_OUTBOX_FLUSH": "600", "DAGQ_SWEEP_INTERVAL": "600"}
"""Doomed coordinators write only when they apply completions (no idle clearing)."""
CHAOS_ENV = {"DAGQ_HEARTBEAT_INTERVAL": "1", "DAGQ_OUTBOX_GRACE": "2"}


def test_four_coordinator_kills_during_a_fan_out_run_every_attempt_once(az: Dagq) -> None:
    log = az.root / "runs.log"
    slow = sh_step(log)
    path = az.define("chaos", [
        {"name": "root", "kwargs": {"cmd": sh_step(log)}},
        *({"name": f"fan-{i}", "depends_on": ["root"], "kwargs": {"cmd": "sleep 1; " + slow}}
          for i in range(FANS)),
    ])
    stats = az.root / "stats.jsonl"
    env = {**CHAOS_ENV, "DAGQ_STATS_FILE": str(stats)}
    workers = [az.worker("default", concurrency=4, env=env) for _ in range(2)]
    wf = az.submit(path, "--id", "chaos-1")
    # the first doomed coordinator dies after sending the fan-out (its 3rd commit: start,
    # first sweep, root completion); each later one dies after its first commit, which
    # re-sends the whole stale outbox
    for kill in range(KILLS):
        doomed = az.coordinator(env={**env, **DOOMED_ENV,
                                     "DAGQ_CRASH_AT": f"after_send:{3 if kill == 0 else 1}"})
        assert doomed.wait(120) == -signal.SIGKILL, doomed.text()
        if kill == 0:
            eventually(lambda: len(executions(log)) > 1, "the fan-out to start", 60)
        time.sleep(2.5)  # past the outbox grace: the next coordinator re-sends it all
    survivor = az.coordinator(env=env)
    summary = az.wait_terminal(wf, deadline_s=300)
    assert summary["status"] == "completed", az.diagnostics(wf)
    assert summary["counts"] == {"completed": FANS + 1}
    assert survivor.stop() == 0
    resent = int(dict(re.findall(r"(\w+)=(\d+)", survivor.text())).get("resent", 0))
    for w in workers:
        assert w.stop(60) == 0, w.text()
    runs = Counter((task, attempt) for _, task, attempt in executions(log))
    assert len(runs) == FANS + 1
    twice = {k: n for k, n in runs.items() if n > 1}
    assert not twice, f"duplicate executions: {twice}"
    counts: Counter[str] = Counter()
    for line in stats.read_text().splitlines():
        counts.update(json.loads(line)["counts"])
    # copies did reach the workers (else this test proves nothing) and none of them ran
    copies = counts["duplicates_dropped"]
    assert copies > 0 or resent > 0, (counts, resent)
    print(f"chaos: {KILLS} kills, {FANS} fan-out tasks, survivor resent={resent}, "
          f"copies dropped={copies}, hidden={counts['duplicates_hidden']}, "
          f"duplicate executions={len(twice)}")

"""A concurrency key's limit holds when the coordinator is killed with SIGKILL right after
taking a slot (``after_slot_acquire``) or after a write that ended attempts but before
their slots were released (``after_index``): the restarted coordinator's sweep drops the
holders whose attempt no longer runs, every workflow completes, and the tasks' own log
never shows more than the limit running at once (docs/concurrency.md)."""

from __future__ import annotations

import pytest

from tests.e2e.harness import Dagq, eventually

pytestmark = pytest.mark.slow

LIMIT = 2


def _peak(lines: list[str]) -> int:
    running = peak = 0
    for line in lines:
        running += 1 if line.startswith("+") else -1
        peak = max(peak, running)
    return peak


@pytest.mark.parametrize("point", ["after_slot_acquire:2", "after_index:4"])
def test_the_limit_holds_across_a_coordinator_killed_at(dagq: Dagq, point: str) -> None:
    log = dagq.root / "runs.log"
    cmd = (f'echo "+ $DAGQ_WORKFLOW_ID/$DAGQ_TASK" >> {log}; sleep 0.5; '
           f'echo "- $DAGQ_WORKFLOW_ID/$DAGQ_TASK" >> {log}')
    path = dagq.define("keyed", [{"name": f"t{i}", "kwargs": {"cmd": cmd}} for i in range(3)],
                       params={"dataset": "x"},
                       concurrency={"key": "{params.dataset}", "limit": LIMIT})
    ids = [dagq.submit(path) for _ in range(2)]
    doomed = dagq.coordinator(env={"DAGQ_CRASH_AT": point})
    dagq.worker("default", concurrency=6)
    eventually(lambda: doomed.popen.poll() is not None or None, "the coordinator to be killed")
    dagq.coordinator()
    statuses = dagq.wait_all_terminal(ids, deadline_s=120)
    assert {s["status"] for s in statuses.values()} == {"completed"}, dagq.diagnostics()
    lines = log.read_text().splitlines()
    assert _peak(lines) <= LIMIT, lines
    assert len([line for line in lines if line.startswith("+")]) >= 6

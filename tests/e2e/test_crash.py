"""Crash tests: SIGKILL the coordinator (or a submitter, or a worker) at every crash point
of docs/coordinator.md through the test-only ``DAGQ_CRASH_AT`` hook, restart, and check
that every workflow still ends with the right statuses and outputs, and that duplicate
executions happen only where the document says they may."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

import pytest

from dagq.backends import open_backend
from dagq.core.engine import loads
from dagq.protocol.messages import CompletionMessage
from dagq.protocol.names import COMPLETIONS
from tests.e2e.harness import REPO, Dagq, eventually, executions, kill_pidfile, step
from tests.e2e.workloads import check_mix, check_runs, define_mix

pytestmark = pytest.mark.slow

WORKFLOWS = 3

# The doomed coordinator's own sweep runs once, right after its first batch (the WORKFLOWS
# starts), and it never flushes or re-sends: so its commits are deterministic. Commits
# 1..W start the workflows, W+1..2W are that sweep clearing the sent root dispatches, and
# commit 2W+1 applies the first root completion, which dispatches the fan-out. Acks are
# counted per workflow group and receives per non-empty batch.
FAN_OUT_COMMIT = 2 * WORKFLOWS + 1
DOOMED_ENV = {"DAGQ_OUTBOX_FLUSH": "600", "DAGQ_OUTBOX_GRACE": "600",
              "DAGQ_SWEEP_INTERVAL": "600"}


@dataclass(frozen=True)
class Point:
    """A coordinator crash point, when to crash there, and what the document promises."""

    name: str
    n: int
    fan_out_written: bool
    """After the crash, some state holds fan-out dispatches in its outbox (else no root
    completion was applied yet)."""
    duplicates_allowed: bool
    """The "duplicate execution?" column of docs/coordinator.md."""


COORDINATOR_POINTS = [
    Point("after_receive", 2, fan_out_written=False, duplicates_allowed=False),
    Point("after_apply", FAN_OUT_COMMIT, fan_out_written=False, duplicates_allowed=False),
    Point("after_write", FAN_OUT_COMMIT, fan_out_written=True, duplicates_allowed=False),
    Point("after_send", FAN_OUT_COMMIT, fan_out_written=True, duplicates_allowed=True),
    Point("after_index", FAN_OUT_COMMIT, fan_out_written=True, duplicates_allowed=True),
    Point("after_ack", WORKFLOWS + 1, fan_out_written=True, duplicates_allowed=True),
]


def _fan_out_in_outbox(dagq: Dagq, ids: list[str]) -> bool:
    """True if some workflow's stored state holds fan-out dispatches in its outbox."""
    backend = open_backend(dagq.store)
    try:
        outboxes = [loads(backend.states.read(wf)[0]).outbox for wf in ids]
    finally:
        backend.close()
    return any("/fan-1/" in key for box in outboxes for key in box)


def test_every_documented_crash_point_is_covered() -> None:
    doc = (REPO / "docs" / "coordinator.md").read_text()
    table = set(re.findall(r"^\| `(\w+)` \(\d\)", doc, re.M))
    assert table == {p.name for p in COORDINATOR_POINTS}
    assert {"submit_after_index", "submit_after_state"} <= set(re.findall(r"`(submit_\w+)`", doc))


@pytest.mark.parametrize("point", COORDINATOR_POINTS, ids=lambda p: p.name)
def test_coordinator_killed_at_crash_point(dagq: Dagq, point: Point) -> None:
    log = dagq.root / "runs.log"
    path = define_mix(dagq, log)
    dagq.worker("default", concurrency=3)
    ids = dagq.ok("submit", *[str(path)] * WORKFLOWS).split()
    assert len(ids) == WORKFLOWS

    doomed = dagq.coordinator(env={**DOOMED_ENV, "DAGQ_CRASH_AT": f"{point.name}:{point.n}"})
    assert doomed.wait(60) == -signal.SIGKILL, doomed.text()
    # caught mid-way, at the intended step (white-box: the stored outboxes)
    assert all(dagq.status(wf)["status"] == "running" for wf in ids)
    assert _fan_out_in_outbox(dagq, ids) == point.fan_out_written, (
        "the crash did not hit the intended step: recount N (see COORDINATOR_POINTS)")

    dagq.coordinator()
    check_mix(dagq, ids)
    for wf in ids:
        check_runs(log, wf, point.duplicates_allowed)


@pytest.mark.parametrize("point", ["submit_after_index", "submit_after_state"])
def test_submitter_killed_then_same_id_resubmitted(dagq: Dagq, point: str) -> None:
    log = dagq.root / "runs.log"
    path = define_mix(dagq, log)
    dagq.worker("default", concurrency=3)
    # no sweep may start or fail it before the second submission
    dagq.coordinator(env={"DAGQ_STALE_PENDING": "600"})
    res = dagq.run("submit", str(path), "--id", "crashed-submit",
                   env={"DAGQ_CRASH_AT": point})
    assert res.returncode == -signal.SIGKILL, res.stderr
    assert res.stdout == ""
    assert dagq.status("crashed-submit")["status"] == "pending"
    assert dagq.ok("submit", str(path), "--id", "crashed-submit").split() == ["crashed-submit"]
    check_mix(dagq, ["crashed-submit"])
    check_runs(log, "crashed-submit", duplicates_allowed=False)


@pytest.mark.parametrize(("point", "final"), [
    ("submit_after_index", "failed"),  # no state was stored: nothing can run
    ("submit_after_state", "completed"),  # stored but never started: the sweep starts it
])
def test_submitter_killed_then_sweep_settles_it(dagq: Dagq, point: str, final: str) -> None:
    log = dagq.root / "runs.log"
    path = define_mix(dagq, log)
    dagq.worker("default", concurrency=3)
    dagq.coordinator()  # DAGQ_STALE_PENDING=2
    res = dagq.run("submit", str(path), "--id", "orphan", env={"DAGQ_CRASH_AT": point})
    assert res.returncode == -signal.SIGKILL, res.stderr
    if final == "completed":
        check_mix(dagq, ["orphan"])
        check_runs(log, "orphan", duplicates_allowed=False)
    else:
        assert dagq.wait_terminal("orphan")["status"] == "failed"
        assert executions(log) == []


@pytest.mark.parametrize("point", [
    "mid_task",  # kill -9 from outside while the task runs
    "worker_before_complete",  # the task ended, its completion was never sent
    "worker_after_complete",  # the completion was sent, the message never deleted
])
def test_worker_killed_then_task_redelivered(dagq: Dagq, point: str) -> None:
    log, pidfile = dagq.root / "runs.log", dagq.root / "slow.pid"
    dagq.task_pids.append(pidfile)
    path = dagq.define("slow", [
        {"name": "slow", "kwargs": {"cmd": "exec " + step(
            "--log", log, "--pidfile", pidfile, "--sleep", 1, "--v", 3)}},
        {"name": "after", "depends_on": ["slow"],
         "kwargs": {"cmd": step("--log", log, "--sum-upstream")}},
    ])
    dagq.coordinator()
    lease = {"DAGQ_VISIBILITY_TIMEOUT": "2"}
    hook = {} if point == "mid_task" else {"DAGQ_CRASH_AT": point}
    first = dagq.worker("default", concurrency=1, env={**lease, **hook})
    wf = dagq.submit(path)
    if point == "mid_task":
        eventually(lambda: pidfile.exists() and pidfile.read_text().strip(), "the task to start")
        first.kill()
        # the task process survives its worker (own session); the machine "lost" it too
        kill_pidfile(pidfile)
    assert first.wait() == -signal.SIGKILL, first.text()
    counted = point == "worker_after_complete"
    if counted:  # the completion was applied before the message comes back
        eventually(lambda: dagq.statuses(wf)["slow"] == "completed", "slow's completion")

    second = dagq.worker("default", concurrency=1, env=lease)
    assert dagq.wait_terminal(wf)["status"] == "completed", dagq.diagnostics(wf)
    tasks = dagq.tasks(wf)
    assert (tasks["slow"]["attempt"], tasks["after"]["attempt"]) == (1, 1)  # same attempt
    assert dagq.output(wf, "after")["total"] == 3
    # the redelivered message runs the attempt again only if its first run never reported:
    # after a sent completion the claim check finds the attempt finished and drops the copy
    backend = open_backend(dagq.store)
    eventually(lambda: backend.queues.get("default").approximate_count() == 0,
               "the redelivered task message to be consumed")
    backend.close()
    runs = sorted((task, attempt) for _, task, attempt in executions(log))
    reran = not counted
    assert runs == [("after", 1), ("slow", 1)] + [("slow", 1)] * reran
    assert dagq.statuses(wf) == {"slow": "completed", "after": "completed"}
    assert second.stop() == 0
    assert f"succeeded={1 + reran}" in second.text(), second.text()
    # a copy of a finished attempt is dropped unrun, by its claim or by the start check
    dropped = sum(int(m) for m in re.findall(r"(?:duplicates_)?dropped=(\d+)", second.text()))
    assert dropped == int(counted), second.text()


def test_completion_delivered_twice_is_applied_once(dagq: Dagq) -> None:
    log = dagq.root / "runs.log"
    path = dagq.define("dup", [
        {"name": "external", "queue": "nobody-listens", "kwargs": {"cmd": "true"}},
        {"name": "after", "depends_on": ["external"],
         "kwargs": {"cmd": step("--log", log, "--sum-upstream")}},
    ])
    coordinator = dagq.coordinator()
    dagq.worker("default", concurrency=1)
    wf = dagq.submit(path)
    eventually(lambda: dagq.statuses(wf)["external"] == "running", "the dispatch")

    backend = open_backend(dagq.store)
    completions = backend.queues.get(COMPLETIONS)
    done = CompletionMessage(wf, "external", 1, success=True, output={"v": 7})
    completions.send(done.encode())
    eventually(lambda: dagq.statuses(wf)["external"] == "completed", "the first completion")
    completions.send(done.encode())  # redelivered
    completions.send(CompletionMessage(wf, "external", 1, success=False,
                                       error="a late report of the same attempt").encode())
    eventually(lambda: completions.approximate_count() == 0, "the duplicates to be consumed")
    assert dagq.wait_terminal(wf)["status"] == "completed"

    tasks = dagq.tasks(wf)
    assert (tasks["external"]["status"], tasks["external"]["attempt"]) == ("completed", 1)
    assert tasks["external"]["error"] is None
    assert dagq.output(wf, "external") == {"v": 7}
    assert dagq.output(wf, "after")["total"] == 7
    assert [task for _, task, _ in executions(log)] == ["after"]
    assert coordinator.stop() == 0
    assert "duplicates=2" in coordinator.text(), coordinator.text()
    backend.close()


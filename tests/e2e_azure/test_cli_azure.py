"""A representative end-to-end subset on Azurite through the real CLI: the diamond, a
failure cascade, conditions, an output stored in Blob Storage, cancel of a running task and
a coordinator killed mid-workflow and restarted. Workflows stay small: the emulator serves
about a hundred requests a second."""

from __future__ import annotations

import hashlib
import json
import re
import signal
from pathlib import Path

import pytest

from dagq.core.engine import loads
from dagq.ports import Backend
from tests.e2e.harness import TERMINAL, Dagq, eventually, executions, pid_alive, step
from tests.e2e.workloads import CASCADE_TASKS, condition_tasks

pytestmark = [pytest.mark.slow, pytest.mark.azurite]

RUN_DEADLINE_S = 120.0


def _emit(value: object) -> str:
    """A shell task publishing ``value`` as its output (no Python start-up)."""
    return f"echo '{json.dumps(value)}' > \"$DAGQ_OUTPUT_FILE\""


def _logged(log: Path, value: object | None = None) -> str:
    """A shell task that appends ``workflow task attempt`` to ``log`` (and publishes)."""
    line = f'echo "$DAGQ_WORKFLOW_ID $DAGQ_TASK $DAGQ_ATTEMPT" >> {log}'
    return line if value is None else f"{line}; {_emit(value)}"


def _run(az: Dagq, path: Path, wf_id: str) -> int:
    """``dagq run PATH --id ID`` to the end; its exit code (the id is checked on stdout)."""
    res = az.run("run", str(path), "--id", wf_id, "--workers", "2", timeout_s=RUN_DEADLINE_S)
    assert res.stdout.split() == [wf_id], f"stdout: {res.stdout}\nstderr: {res.stderr}"
    return res.returncode


def test_diamond_passes_outputs_downstream(az: Dagq) -> None:
    log = az.root / "runs.log"
    path = az.define("diamond", [
        {"name": "featurize", "kwargs": {"cmd": _logged(log, {"v": 1})}},
        {"name": "train-a", "depends_on": ["featurize"],
         "kwargs": {"cmd": _logged(log, {"v": 10})}},
        {"name": "train-b", "depends_on": ["featurize"], "queue": "other",
         "kwargs": {"cmd": _logged(log, {"v": 100})}},
        {"name": "compare", "depends_on": ["train-a", "train-b"],
         "kwargs": {"cmd": step("--log", log, "--sum-upstream")}},
    ])
    assert _run(az, path, "diamond-1") == 0, az.diagnostics("diamond-1")
    summary = az.status("diamond-1")
    assert (summary["status"], summary["counts"]) == ("completed", {"completed": 4})
    # compare sees its direct upstreams only: 10 + 100, not featurize's 1
    assert az.output("diamond-1", "compare") == {"task": "compare", "attempt": 1, "total": 110}
    assert az.output("diamond-1", "train-b") == {"v": 100}
    assert az.tasks("diamond-1")["train-b"]["queue"] == "other"
    order = [task for _, task, _ in executions(log)]
    assert sorted(order) == ["compare", "featurize", "train-a", "train-b"]
    assert (order[0], order[-1]) == ("featurize", "compare")


def test_failure_cascades_to_upstream_failed(az: Dagq) -> None:
    path = az.define("cascade", CASCADE_TASKS)
    assert _run(az, path, "cascade-1") == 1
    assert az.status("cascade-1")["status"] == "failed"
    tasks = az.tasks("cascade-1")
    assert {n: t["status"] for n, t in tasks.items()} == {
        "fine": "completed", "broken": "failed", "child": "upstream_failed",
        "grandchild": "upstream_failed"}
    assert "exited with code 3" in tasks["broken"]["error"]
    assert "disk on fire" in tasks["broken"]["error"]


def test_conditions_true_false_and_aggregate(az: Dagq) -> None:
    log = az.root / "runs.log"
    run = _logged(log)
    path = az.define("conditions", condition_tasks(lambda v: _emit({"v": v}), run))
    assert _run(az, path, "conditions-1") == 0, az.diagnostics("conditions-1")
    assert az.statuses("conditions-1") == {
        "score-a": "completed", "score-b": "completed", "if-true": "completed",
        "if-false": "skipped", "agg-true": "completed", "agg-false": "skipped"}
    assert sorted(task for _, task, _ in executions(log)) == ["agg-true", "if-true"]


def test_output_over_32_kib_lives_in_blob_storage(az: Dagq, az_backend: Backend) -> None:
    pad = 40 * 1024
    path = az.define("large", [
        {"name": "big", "kwargs": {"cmd": step("--v", 5, "--pad", pad)}},
        {"name": "big-true", "depends_on": ["big"],
         "condition": "inputs.big.v == 5 and inputs.big.attempt == 1",
         "kwargs": {"cmd": step("--sum-upstream")}},
        {"name": "big-false", "depends_on": ["big"], "condition": "inputs.big.v == 6",
         "kwargs": {"cmd": "true"}},
    ])
    assert _run(az, path, "large-1") == 0, az.diagnostics("large-1")
    expected = {"task": "big", "attempt": 1, "v": 5, "pad": "x" * pad}
    assert az.output("large-1", "big") == expected
    assert az.statuses("large-1") == {
        "big": "completed", "big-true": "completed", "big-false": "skipped"}
    assert az.output("large-1", "big-true")["total"] == 5  # resolved from the blob

    # the value is a blob in the outputs container, referenced (not copied) by the state
    blobs = az_backend.outputs.list("outputs/large-1/big/")
    assert len(blobs) == 1, blobs
    name, size, md5 = blobs[0]
    data = az_backend.outputs.get(name)
    assert (size, json.loads(data)) == (len(data), expected)
    assert md5 == hashlib.md5(data).hexdigest()
    state, _ = az_backend.states.read("large-1")
    assert len(state) < pad and b"x" * 1024 not in state


def test_cancel_kills_the_running_task(az: Dagq) -> None:
    pidfile = az.root / "long.pid"
    az.task_pids.append(pidfile)
    path = az.define("cancel-me", [
        {"name": "long", "kwargs": {"cmd": f"echo $$ > {pidfile}; exec sleep 300"}},
        {"name": "after", "depends_on": ["long"], "kwargs": {"cmd": "true"}},
    ])
    runner = az.start("run", "run", str(path), "--id", "cancel-1")
    eventually(lambda: pidfile.exists() and pidfile.read_text().strip(), "the task to start",
               deadline_s=RUN_DEADLINE_S)
    pid = int(pidfile.read_text())
    assert pid_alive(pid)

    az.ok("cancel", "cancel-1")
    assert runner.wait(RUN_DEADLINE_S) == 3, runner.text()  # cancelled (dagq.cli.exits)
    summary = az.status("cancel-1")
    assert (summary["status"], summary["cancel_requested"]) == ("cancelled", True)
    assert az.statuses("cancel-1") == {"long": "cancelled", "after": "cancelled"}
    eventually(lambda: not pid_alive(pid), "the cancelled task's process to be gone",
               deadline_s=30)


def test_coordinator_killed_and_restarted(az: Dagq, az_backend: Backend) -> None:
    log = az.root / "runs.log"
    path = az.define("crash", [
        {"name": "a", "kwargs": {"cmd": _logged(log, {"v": 1})}},
        {"name": "b", "depends_on": ["a"], "kwargs": {"cmd": _logged(log, {"v": 2})}},
        {"name": "c", "depends_on": ["a"], "kwargs": {"cmd": _logged(log, {"v": 3})}},
        {"name": "d", "depends_on": ["b", "c"],
         "kwargs": {"cmd": step("--log", log, "--sum-upstream")}},
        {"name": "e", "depends_on": ["d"], "condition": "inputs.d.total == 5",
         "kwargs": {"cmd": _logged(log)}},
    ])
    az.worker("default", concurrency=2)
    wf = az.submit(path, "--id", "crash-1")

    # The doomed coordinator's writes: (1) the start, dispatching a; (2) its first sweep,
    # clearing a's sent entry; (3) a's completion, dispatching b and c -- then the kill,
    # before anything is sent. No idle flush or later sweep may write in between.
    doomed = az.coordinator(env={"DAGQ_CRASH_AT": "after_write:3", "DAGQ_OUTBOX_FLUSH": "600",
                                 "DAGQ_SWEEP_INTERVAL": "600"})
    assert doomed.wait(RUN_DEADLINE_S) == -signal.SIGKILL, doomed.text()
    state = loads(az_backend.states.read(wf)[0])
    unsent = sorted(e.payload.task for e in state.outbox.values() if e.kind == "dispatch")
    assert unsent == ["b", "c"], state.outbox
    assert [task for _, task, _ in executions(log)] == ["a"]
    assert az.status(wf)["status"] not in TERMINAL

    survivor = az.coordinator()
    summary = az.wait_terminal(wf, deadline_s=RUN_DEADLINE_S)
    assert summary["status"] == "completed", az.diagnostics(wf)
    assert summary["counts"] == {"completed": 5}
    tasks = az.tasks(wf)
    assert {n: (t["status"], t["attempt"]) for n, t in tasks.items()} == {
        n: ("completed", 1) for n in "abcde"}
    assert az.output(wf, "d")["total"] == 5  # b + c
    # the lost write's messages were never sent, so nothing ran twice; the restarted
    # coordinator found them in the stored outbox and sent them
    assert sorted(task for _, task, _ in executions(log)) == list("abcde")
    assert survivor.stop() == 0
    counts = dict(re.findall(r"(\w+)=(\d+)", survivor.text()))
    assert int(counts.get("resent", 0)) >= 2, survivor.text()  # b and c
    assert int(counts.get("duplicates", 0)) >= 1, survivor.text()  # a's redelivery

"""Workflows end to end through the real CLI: one store with a coordinator and workers
running as separate processes; each test submits with ``dagq submit`` and inspects with
``dagq status/tasks/output``."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dagq.backends import open_backend
from tests.e2e.harness import SCRIPTS, Dagq, eventually, executions, pid_alive, step
from tests.e2e.workloads import CASCADE_TASKS, condition_tasks

pytestmark = pytest.mark.slow


def _log(cluster: Dagq, name: str) -> Path:
    return cluster.root / f"{name}.log"


def test_diamond_passes_outputs_downstream(cluster: Dagq) -> None:
    log = _log(cluster, "diamond")
    path = cluster.define("diamond", [
        {"name": "featurize", "kwargs": {"cmd": step("--log", log, "--v", 1)}},
        {"name": "train-a", "depends_on": ["featurize"],
         "kwargs": {"cmd": step("--log", log, "--v", 10)}},
        {"name": "train-b", "depends_on": ["featurize"], "queue": "other",
         "kwargs": {"cmd": step("--log", log, "--v", 100)}},
        {"name": "compare", "depends_on": ["train-a", "train-b"],
         "kwargs": {"cmd": step("--log", log, "--sum-upstream")}},
    ])
    wf = cluster.submit(path)
    summary = cluster.wait_terminal(wf)
    assert summary["status"] == "completed"
    assert summary["counts"] == {"completed": 4}
    # compare sees exactly its direct upstreams: 10 + 100, not featurize's 1
    assert cluster.output(wf, "compare") == {"task": "compare", "attempt": 1, "total": 110}
    order = [task for _, task, _ in executions(log)]
    assert sorted(order) == ["compare", "featurize", "train-a", "train-b"]
    assert order[0] == "featurize" and order[-1] == "compare"
    assert cluster.tasks(wf)["train-b"]["queue"] == "other"


def test_failure_cascades_to_upstream_failed(cluster: Dagq) -> None:
    path = cluster.define("cascade", CASCADE_TASKS)
    wf = cluster.submit(path)
    assert cluster.wait_terminal(wf)["status"] == "failed"
    tasks = cluster.tasks(wf)
    assert {n: t["status"] for n, t in tasks.items()} == {
        "fine": "completed", "broken": "failed", "child": "upstream_failed",
        "grandchild": "upstream_failed"}
    assert "exited with code 3" in tasks["broken"]["error"]
    assert "disk on fire" in tasks["broken"]["error"]
    assert cluster.status(wf)["counts"] == {"completed": 1, "failed": 1, "upstream_failed": 2}


def test_any_and_integer_dependency_policies(cluster: Dagq) -> None:
    def sums(name: str, deps: list[str], policy: object) -> dict[str, object]:
        return {"name": name, "depends_on": deps, "dep_policy": policy,
                "kwargs": {"cmd": step("--sum-upstream")}}

    path = cluster.define("policies", [
        {"name": "good-1", "kwargs": {"cmd": step("--v", 1)}},
        {"name": "good-2", "kwargs": {"cmd": step("--v", 2)}},
        {"name": "bad-1", "kwargs": {"cmd": "exit 1"}},
        {"name": "bad-2", "kwargs": {"cmd": "exit 1"}},
        sums("any-mixed", ["good-1", "bad-1"], "any"),
        sums("any-all-bad", ["bad-1", "bad-2"], "any"),
        sums("two-of-three", ["good-1", "good-2", "bad-1"], 2),
        sums("three-of-four", ["good-1", "good-2", "bad-1", "bad-2"], 3),
        sums("all-default", ["good-1", "bad-1"], "all"),
    ])
    wf = cluster.submit(path)
    assert cluster.wait_terminal(wf)["status"] == "failed"
    assert cluster.statuses(wf) == {
        "good-1": "completed", "good-2": "completed", "bad-1": "failed", "bad-2": "failed",
        "any-mixed": "completed", "any-all-bad": "upstream_failed",
        "two-of-three": "completed", "three-of-four": "upstream_failed",
        "all-default": "upstream_failed"}
    # inputs hold the upstreams that succeeded
    assert cluster.output(wf, "any-mixed")["total"] == 1
    assert cluster.output(wf, "two-of-three")["total"] == 3


def test_conditions_true_false_and_aggregate(cluster: Dagq) -> None:
    log = _log(cluster, "conditions")
    run = step("--log", log)
    path = cluster.define("conditions", [
        *condition_tasks(lambda v: step("--v", v), run),
        {"name": "after-skip", "depends_on": ["if-false", "agg-false"],
         "kwargs": {"cmd": run}},
    ])
    wf = cluster.submit(path)
    assert cluster.wait_terminal(wf)["status"] == "completed"
    statuses = cluster.statuses(wf)
    assert statuses == {
        "score-a": "completed", "score-b": "completed", "if-true": "completed",
        "if-false": "skipped", "agg-true": "completed", "agg-false": "skipped",
        "after-skip": "completed"}
    ran = sorted(task for _, task, _ in executions(log))
    assert ran == ["after-skip", "agg-true", "if-true"]


def test_retries_count_attempts(cluster: Dagq) -> None:
    log = _log(cluster, "retries")
    path = cluster.define("retries", [
        {"name": "flaky", "num_retries": 3, "retry_backoff_s": 0.1,
         "kwargs": {"cmd": step("--log", log, "--fail-until", 3)}},
        {"name": "hopeless", "num_retries": 1, "retry_backoff_s": 0.1,
         "kwargs": {"cmd": step("--log", log, "--fail-until", 99)}},
        {"name": "after-flaky", "depends_on": ["flaky"],
         "kwargs": {"cmd": step("--log", log)}},
    ])
    wf = cluster.submit(path)
    assert cluster.wait_terminal(wf)["status"] == "failed"
    tasks = cluster.tasks(wf)
    assert (tasks["flaky"]["status"], tasks["flaky"]["attempt"]) == ("completed", 3)
    assert (tasks["hopeless"]["status"], tasks["hopeless"]["attempt"]) == ("failed", 2)
    assert "failing attempt 2 on purpose" in tasks["hopeless"]["error"]
    assert tasks["after-flaky"]["status"] == "completed"
    assert cluster.output(wf, "flaky") == {"task": "flaky", "attempt": 3}  # DAGQ_ATTEMPT
    runs = sorted((task, attempt) for _, task, attempt in executions(log))
    assert runs == [("after-flaky", 1), ("flaky", 1), ("flaky", 2), ("flaky", 3),
                    ("hopeless", 1), ("hopeless", 2)]


def test_cancel_kills_the_running_task(cluster: Dagq) -> None:
    pidfile, childfile = cluster.root / "long.pid", cluster.root / "long-child.pid"
    cluster.task_pids += [pidfile, childfile]
    path = cluster.define("cancel-me", [
        {"name": "long", "kwargs": {
            "cmd": f"sleep 300 & echo $! > {childfile}; echo $$ > {pidfile}; exec sleep 300"}},
        {"name": "after", "depends_on": ["long"], "kwargs": {"cmd": "true"}},
    ])
    wf = cluster.submit(path)
    eventually(lambda: pidfile.exists() and pidfile.read_text().strip(), "the task to start")
    pid, child = int(pidfile.read_text()), int(childfile.read_text())
    assert pid_alive(pid) and pid_alive(child)
    cluster.ok("cancel", wf)
    assert cluster.wait_terminal(wf)["status"] == "cancelled"
    assert cluster.statuses(wf)["long"] == "cancelled"
    assert cluster.status(wf)["cancel_requested"] is True
    eventually(lambda: not pid_alive(pid) and not pid_alive(child),
               "the task's process group to be gone", deadline_s=20)


def test_retry_after_fixing_the_cause(cluster: Dagq) -> None:
    log, marker = _log(cluster, "fix"), cluster.root / "fixed.marker"
    path = cluster.define("fix-and-retry", [
        {"name": "needs-marker", "kwargs": {"cmd": step("--log", log, "--require", marker)}},
        {"name": "downstream", "depends_on": ["needs-marker"],
         "kwargs": {"cmd": step("--log", log)}},
    ])
    wf = cluster.submit(path)
    assert cluster.wait_terminal(wf)["status"] == "failed"
    assert cluster.statuses(wf) == {"needs-marker": "failed", "downstream": "upstream_failed"}
    marker.write_text("fixed\n")
    cluster.ok("retry", wf)
    eventually(lambda: cluster.status(wf)["status"] == "completed", "the retried workflow")
    tasks = cluster.tasks(wf)
    assert (tasks["needs-marker"]["status"], tasks["needs-marker"]["attempt"]) == ("completed", 2)
    assert (tasks["downstream"]["status"], tasks["downstream"]["attempt"]) == ("completed", 1)
    runs = [(task, attempt) for _, task, attempt in executions(log)]
    assert runs == [("needs-marker", 1), ("needs-marker", 2), ("downstream", 1)]


def test_inline_and_large_outputs(cluster: Dagq) -> None:
    pad = 40 * 1024
    path = cluster.define("outputs", [
        {"name": "small", "kwargs": {"cmd": step("--v", 4)}},
        {"name": "none", "kwargs": {"cmd": "true"}},
        {"name": "big", "kwargs": {"cmd": step("--v", 5, "--pad", pad)}},
        {"name": "big-true", "depends_on": ["big"],
         "condition": "inputs.big.v == 5 and inputs.big.attempt == 1",
         "kwargs": {"cmd": step("--sum-upstream")}},
        {"name": "big-false", "depends_on": ["big"], "condition": "inputs.big.v == 6",
         "kwargs": {"cmd": "true"}},
    ])
    wf = cluster.submit(path)
    assert cluster.wait_terminal(wf)["status"] == "completed"
    assert cluster.output(wf, "small") == {"task": "small", "attempt": 1, "v": 4}
    assert cluster.output(wf, "none") is None
    big = cluster.output(wf, "big")
    assert big == {"task": "big", "attempt": 1, "v": 5, "pad": "x" * pad}
    statuses = cluster.statuses(wf)
    assert (statuses["big-true"], statuses["big-false"]) == ("completed", "skipped")
    assert cluster.output(wf, "big-true")["total"] == 5  # the inputs file resolved it
    assert cluster.tasks(wf)["big"]["has_output"] is True


def test_file_stashing_between_tasks(cluster: Dagq) -> None:
    script = SCRIPTS / "stash.py"
    path = cluster.define("stash", [
        {"name": "put", "kwargs": {"cmd": f"python {script} put 300000"}},
        {"name": "get", "depends_on": ["put"], "kwargs": {"cmd": f"python {script} get"}},
    ])
    wf = cluster.submit(path)
    assert cluster.wait_terminal(wf)["status"] == "completed"
    made, got = cluster.output(wf, "put"), cluster.output(wf, "get")
    assert got == {"md5": made["md5"], "size": 300000, "name": "weights.bin"}
    stored = open_backend(cluster.store).outputs.get(made["file"]["$dagq_file"]["name"])
    assert hashlib.md5(stored).hexdigest() == made["md5"]


def test_submit_with_id_is_idempotent(cluster: Dagq) -> None:
    log = _log(cluster, "idem")
    same = cluster.define("idem", [{"name": "once", "kwargs": {"cmd": step("--log", log)}}])
    other = cluster.define("idem-other", [{"name": "different", "kwargs": {"cmd": "true"}}])
    assert cluster.ok("submit", str(same), "--id", "nightly-42").split() == ["nightly-42"]
    assert cluster.ok("submit", str(same), "--id", "nightly-42").split() == ["nightly-42"]
    res = cluster.run("submit", str(other), "--id", "nightly-42")
    assert res.returncode == 1
    assert "nightly-42" in res.stderr and res.stdout == ""
    assert cluster.wait_terminal("nightly-42")["status"] == "completed"
    assert cluster.ok("submit", str(same), "--id", "nightly-42").split() == ["nightly-42"]
    assert cluster.statuses("nightly-42") == {"once": "completed"}
    assert [task for _, task, _ in executions(log)] == ["once"]

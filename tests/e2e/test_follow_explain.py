"""End to end through the CLI: ``wait`` exit codes, ``watch`` of a run submitted by another
process, ``explain`` of four stuck-task set-ups, ``graph`` of the README example, and
tables that suit scripts."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from tests.e2e.harness import REPO, Dagq, eventually, step

pytestmark = pytest.mark.slow

COMPLETED, FAILED, USAGE, CANCELLED, TIMED_OUT, NOT_FOUND = 0, 1, 2, 3, 4, 5


def test_wait_has_one_exit_code_per_outcome(cluster: Dagq) -> None:
    ok = cluster.submit(cluster.define("w-ok", [{"name": "a", "kwargs": {"cmd": "true"}}]))
    bad = cluster.submit(cluster.define("w-bad", [{"name": "a", "kwargs": {"cmd": "exit 4"}}]))
    slow = cluster.submit(cluster.define("w-slow", [
        {"name": "a", "kwargs": {"cmd": step("--sleep", 120)}}]))
    assert cluster.run("wait", ok, "--interval", "0.2").returncode == COMPLETED
    assert cluster.run("wait", bad, "--interval", "0.2").returncode == FAILED
    res = cluster.run("wait", slow, "--timeout", "1", "--interval", "0.2")
    assert res.returncode == TIMED_OUT and f"{slow} is running" in res.stderr
    cluster.ok("cancel", slow)
    assert cluster.run("wait", slow, "--interval", "0.2").returncode == CANCELLED
    res = cluster.run("wait", ok, "no-such-workflow")
    assert res.returncode == NOT_FOUND and "no-such-workflow" in res.stderr
    assert cluster.run("wait", ok, bad, "--interval", "0.2").returncode == FAILED
    assert cluster.run("wait").returncode == USAGE


def test_submit_wait_prints_the_id_then_exits_with_the_outcome(cluster: Dagq) -> None:
    path = cluster.define("sw-bad", [{"name": "a", "kwargs": {"cmd": "exit 1"}}])
    res = cluster.run("submit", str(path), "--wait")
    assert res.returncode == FAILED, res.stderr
    (wf,) = res.stdout.split()
    assert cluster.status(wf)["status"] == "failed"


def test_watch_follows_a_run_submitted_elsewhere_until_it_ends(cluster: Dagq) -> None:
    wf = cluster.submit(cluster.define("watched", [
        {"name": "first", "kwargs": {"cmd": step("--sleep", 1)}},
        {"name": "second", "depends_on": ["first"], "kwargs": {"cmd": step("--sleep", 1)}}]))
    watcher = cluster.start("watch", "watch", wf, "--interval", "0.2")
    assert watcher.wait(90) == COMPLETED, watcher.text()
    assert cluster.status(wf)["status"] == "completed"
    assert f"{wf} completed" in watcher.text()
    failing = cluster.define("watched-bad", [{"name": "x", "kwargs": {"cmd": "exit 2"}}])
    res = cluster.run("submit", str(failing), "--watch")
    assert res.returncode == FAILED, res.stderr
    assert cluster.run("watch", "no-such-workflow").returncode == NOT_FOUND


def test_explain_names_the_missing_worker_the_dependency_the_condition_and_the_back_off(
        cluster: Dagq) -> None:
    wf = cluster.submit(cluster.define("stuck", [
        {"name": "render", "queue": "nobody", "kwargs": {"cmd": "true"}},
        {"name": "publish", "depends_on": ["render"], "kwargs": {"cmd": "true"}},
        {"name": "check", "kwargs": {"cmd": step("--v", 1)}},
        {"name": "deploy", "depends_on": ["check"], "condition": "inputs.check.v > 5",
         "kwargs": {"cmd": "true"}},
        {"name": "flaky", "num_retries": 2, "retry_backoff_s": 600, "kwargs": {"cmd": "exit 7"}},
    ]))
    started = time.time()

    def settled() -> dict[str, dict[str, object]] | None:
        rows = {r["task"]: r for r in cluster.json("explain", wf)}
        return rows if (rows["deploy"]["status"] == "skipped"
                        and rows["flaky"]["phase"] == "waiting") else None

    rows = eventually(settled, "deploy skipped and flaky backing off", 60)
    assert rows["render"]["phase"] == "queued"
    assert any("queue 'nobody' has no live worker" in r for r in rows["render"]["reasons"])
    assert rows["publish"]["waiting_for"] == ["render"]
    assert any("waiting for dependencies: render" in r for r in rows["publish"]["reasons"])
    assert any("condition is false: inputs.check.v > 5" in r for r in rows["deploy"]["reasons"])
    assert any('"v": 1' in r for r in rows["deploy"]["reasons"])  # the value it saw
    until = datetime.fromisoformat(rows["flaky"]["until"]).timestamp()  # ISO-8601 UTC
    assert started + 590 < until < time.time() + 601
    assert any("retry back-off after attempt 1 failed" in r for r in rows["flaky"]["reasons"])
    text = cluster.ok("explain", wf, "flaky")
    stamp = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(until))
    assert "flaky" in text and stamp in text
    phases = {name: r["phase"] for name, r in cluster.tasks(wf).items()}
    assert phases["render"] == "queued" and phases["flaky"] == "waiting"
    assert "queued" in cluster.ok("tasks", "--workflow", wf, "--status", "running")
    assert cluster.run("explain", wf, "no-such-task").returncode == NOT_FOUND
    cluster.ok("cancel", wf)


def readme_example(tmp: Path) -> tuple[Path, set[tuple[str, str]]]:
    text = (REPO / "README.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert block, "README has no YAML example"
    defn = yaml.safe_load(block.group(1))
    edges = {(d, t["name"]) for t in defn["tasks"] for d in t.get("depends_on", [])}
    path = tmp / "readme.yaml"
    path.write_text(block.group(1))
    return path, edges


def test_graph_mermaid_of_the_readme_example_has_exactly_its_edges(dagq: Dagq) -> None:
    path, edges = readme_example(dagq.root)
    src = dagq.ok("graph", str(path), "--format", "mermaid")
    assert src.startswith("flowchart")
    labels = dict(re.findall(r'^\s+(n\d+)\["(.*)"\]$', src, re.M))
    drawn = {(labels[a], labels[b]) for a, b in re.findall(r"^\s+(n\d+) --> (n\d+)$", src, re.M)}
    assert drawn == edges and len(edges) == 5
    dot = dagq.ok("graph", str(path), "--format", "dot")
    assert dot.count(" -> ") == len(edges)
    svg = dagq.ok("graph", str(path), "--format", "svg")
    assert svg.count('class="node"') == len(labels)


def test_a_graph_of_a_run_is_coloured_by_status(cluster: Dagq) -> None:
    wf = cluster.submit(cluster.define("g-run", [
        {"name": "a", "kwargs": {"cmd": "true"}},
        {"name": "b", "depends_on": ["a"], "kwargs": {"cmd": "exit 1"}}]))
    cluster.wait_terminal(wf)
    src = cluster.ok("graph", wf, "--format", "mermaid")
    assert '["a (completed)"]' in src and '["b (failed)"]' in src
    assert "classDef failed fill:#c62828" in src
    assert cluster.run("graph", "neither-a-file-nor-an-id").returncode == NOT_FOUND


def test_tables_give_whole_ids_tab_separated_newest_first(dagq: Dagq) -> None:
    long_id = "a-rather-long-workflow-id-" + "x" * 100
    path = dagq.define("t-long", [{"name": "a", "kwargs": {"cmd": "true"}}])
    dagq.submit(path, "--id", long_id)
    time.sleep(0.05)
    other = dagq.submit(dagq.define("t-other", [{"name": "a", "kwargs": {"cmd": "true"}}]))
    out = dagq.ok("list")
    assert [line.split("\t")[0] for line in out.splitlines()] == [other, long_id]
    assert dagq.ok("list", "--limit", "1").split("\t")[0] == other
    assert dagq.ok("list", "--name", "long").split("\t")[0] == long_id
    assert dagq.ok("list", "--since", "1h").count("\n") == 2
    assert dagq.ok("list", "--since", "2999-01-01") == ""
    res = dagq.run()
    assert res.returncode == 0 and "Commands:" in res.stdout
    assert dagq.run("list", "--limit", "0").returncode == USAGE


def test_reporting_commands_take_json(dagq: Dagq) -> None:
    good = dagq.define("j-good", [{"name": "a", "kwargs": {"cmd": "true"}}])
    bad = dagq.write("j-bad.yaml", "name: x\ntasks:\n  - {name: a, depends_on: [zz]}\n")
    res = dagq.run("validate", str(good), str(bad), "--json")
    report = json.loads(res.stdout)
    assert res.returncode == FAILED
    assert [(r["valid"], r["tasks"]) for r in report] == [(True, 1), (False, None)]
    assert any("zz" in p["message"] for p in report[1]["problems"])  # the HTTP API's shape
    (sub,) = dagq.json("submit", str(good), "--id", "j-1")
    assert sub == {"file": str(good), "id": "j-1", "created": True}
    cancelled = dagq.json("cancel", "j-1")  # the summary, with the cancel already in effect
    assert (cancelled["id"], cancelled["status"], cancelled["cancel_requested"]) == (
        "j-1", "cancelled", True)
    assert dagq.json("retry", "j-1")["id"] == "j-1"
    doctor = json.loads(dagq.run("doctor", "--json").stdout)
    assert doctor["live_workers"] == {} and isinstance(doctor["problems"], list)
    model = dagq.json("graph", str(good))
    assert model["tasks"][0]["name"] == "a"
    done = dagq.run("run", str(good), "--json", timeout_s=120)
    assert done.returncode == COMPLETED and json.loads(done.stdout)["status"] == "completed"


def test_a_task_shows_started_as_soon_as_a_worker_takes_it(dagq: Dagq) -> None:
    # heartbeats every 10 minutes: only the beat on a change of running tasks can tell
    dagq.coordinator()
    dagq.worker("default", env={"DAGQ_HEARTBEAT_INTERVAL": "600"})
    wf = dagq.submit(dagq.define("phases", [
        {"name": "busy", "kwargs": {"cmd": step("--sleep", 120)}},
        {"name": "idle", "queue": "elsewhere", "kwargs": {"cmd": "true"}}]))
    try:
        eventually(lambda: dagq.tasks(wf)["busy"]["phase"] == "started", "busy to start", 60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{dagq.diagnostics(wf)}") from None
    assert dagq.tasks(wf)["idle"]["phase"] == "queued"
    table = dagq.ok("tasks", "--workflow", wf)
    assert "busy\trunning" in table and "idle\tqueued" in table
    summary = dagq.status(wf)
    assert summary["counts"] == {"running": 2}
    assert summary["phases"] == {"started": 1, "queued": 1}
    dagq.ok("cancel", wf)

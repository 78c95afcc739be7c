"""The CLI's own contracts: exit codes, messages, JSON shapes and filters, ``dagq run``."""

from __future__ import annotations

import pytest

from tests.e2e.harness import REPO, Dagq, step

pytestmark = pytest.mark.slow

BAD_YAML = """\
name: bad
tasks:
  - name: a
    kwargs: {cmd: "true"}
  - name: b
    depends_on: [a, nowhere]
    kwargs: {cmd: "true"}
  - name: c
    depends_on: [a]
    dep_policy: 3
    condition: "inputs.a >"
    colour: blue
"""


def test_validate_exit_codes_and_messages_with_lines(dagq: Dagq) -> None:
    good = dagq.define("good", [{"name": "a", "kwargs": {"cmd": "true"}}])
    bad = dagq.write("bad.yaml", BAD_YAML)
    broken = dagq.write("broken.yaml", "name: x\ntasks: [\n")

    res = dagq.run("validate", str(good), str(REPO / "examples/ml-pipeline/pipeline.yaml"))
    assert res.returncode == 0, res.stderr
    assert f"{good}: ok (1 tasks)" in res.stderr

    res = dagq.run("validate", str(good), str(bad))
    assert res.returncode == 1
    assert f"{good}: ok" in res.stderr and f"{bad}: invalid" in res.stderr
    lines = res.stderr.splitlines()

    def problem(*parts: str) -> str:
        hits = [ln for ln in lines if all(p in ln for p in parts)]
        assert hits, f"no line with {parts} in:\n{res.stderr}"
        return hits[0]

    problem("line 6", "task 'b'", "unknown task 'nowhere'")
    problem("line 10", "task 'c'", "dep_policy 3")
    problem("line 11", "task 'c'", "condition")
    problem("line 12", "task 'c'", "unknown field 'colour'")

    res = dagq.run("validate", str(broken))
    assert res.returncode == 1
    assert "line 3" in res.stderr and "YAML" in res.stderr

    res = dagq.run("validate", str(dagq.root / "missing.yaml"))
    assert res.returncode == 5 and "missing.yaml: no such file" in res.stderr


def test_submit_of_invalid_input_writes_nothing(dagq: Dagq) -> None:
    good = dagq.define("good", [{"name": "a", "kwargs": {"cmd": "true"}}])
    bad = dagq.write("bad.yaml", BAD_YAML)
    res = dagq.run("submit", str(good), str(bad))
    assert res.returncode == 1 and res.stdout == ""
    assert "nowhere" in res.stderr
    res = dagq.run("submit", str(good), "--id", "no spaces allowed")
    assert res.returncode == 1 and "no spaces allowed" in res.stderr
    assert dagq.json("list") == []


def test_submit_many_files_and_paths_on_stdin(cluster: Dagq) -> None:
    files = [cluster.define(f"many-{i}", [{"name": "t", "kwargs": {"cmd": "true"}}])
             for i in range(3)]
    ids = cluster.ok("submit", *map(str, files), "--concurrency", "2").split()
    assert len(ids) == 3 and len(set(ids)) == 3
    assert [i.rsplit("-", 2)[0] for i in ids] == ["many-0", "many-1", "many-2"]  # input order
    piped = cluster.ok("submit", stdin="".join(f"{f}\n" for f in files[:2]) + "\n").split()
    assert len(piped) == 2 and not set(piped) & set(ids)
    for wf in ids + piped:
        assert cluster.wait_terminal(wf)["status"] == "completed"


def test_status_list_and_tasks_json(cluster: Dagq) -> None:
    path = cluster.define("shapes", [
        {"name": "prep/download", "kwargs": {"cmd": step("--v", 1)}},
        {"name": "prep/clean", "depends_on": ["prep/download"], "kwargs": {"cmd": "true"}},
        {"name": "train", "depends_on": ["prep/clean"], "queue": "other",
         "kwargs": {"cmd": "exit 4"}},
        {"name": "report", "depends_on": ["train"], "kwargs": {"cmd": "true"}},
    ])
    wf = cluster.submit(path)
    cluster.wait_terminal(wf)

    summary = cluster.status(wf)
    assert {"id", "name", "status", "counts", "created_at", "updated_at"} <= set(summary)
    assert (summary["id"], summary["name"], summary["status"]) == (wf, "shapes", "failed")
    assert summary["counts"] == {"completed": 2, "failed": 1, "upstream_failed": 1}

    listed = cluster.json("list")
    assert isinstance(listed, list)
    # status adds the tasks (and the tasks per phase) to the summary list prints
    assert [r for r in listed if r["id"] == wf] == [
        {k: v for k, v in summary.items() if k not in ("phases", "tasks", "tasks_total")}]
    assert [t["name"] for t in summary["tasks"]] == [
        "prep/download", "prep/clean", "train", "report"]
    assert wf in {r["id"] for r in cluster.json("list", "--status", "failed")}
    assert wf not in {r["id"] for r in cluster.json("list", "--status", "completed")}

    rows = cluster.json("tasks", "--workflow", wf)
    assert [r["name"] for r in rows] == ["prep/download", "prep/clean", "train", "report"]
    for r in rows:
        assert {"name", "status", "queue", "attempt", "error"} <= set(r)
    by_name = {r["name"]: r for r in rows}
    assert by_name["train"]["queue"] == "other" and by_name["report"]["queue"] == "default"
    assert by_name["train"]["attempt"] == 1 and "code 4" in by_name["train"]["error"]

    def names(*filters: str) -> list[str]:
        return [r["name"] for r in cluster.json("tasks", "--workflow", wf, *filters)]

    assert names("--prefix", "prep/") == ["prep/download", "prep/clean"]
    assert names("--status", "failed") == ["train"]
    assert names("--status", "upstream_failed") == ["report"]
    assert names("--queue", "other") == ["train"]
    assert names("--prefix", "prep/", "--status", "completed", "--queue", "default") == [
        "prep/download", "prep/clean"]
    assert names("--status", "running") == []

    res = cluster.run("status", "no-such-workflow", "--json")
    assert res.returncode == 5 and "no-such-workflow" in res.stderr and res.stdout == ""
    res = cluster.run("output", wf, "no-such-task")
    assert res.returncode == 5 and "no-such-task" in res.stderr  # not found


def test_run_exit_codes(dagq: Dagq) -> None:
    ok = dagq.define("run-ok", [
        {"name": "a", "kwargs": {"cmd": step("--v", 2)}},
        {"name": "b", "depends_on": ["a"], "queue": "second", "kwargs": {"cmd": "true"}},
    ])
    res = dagq.run("run", str(ok), "--id", "run-ok-1", timeout_s=90)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["run-ok-1"]
    assert "completed" in res.stderr
    assert dagq.statuses("run-ok-1") == {"a": "completed", "b": "completed"}

    bad = dagq.define("run-bad", [
        {"name": "a", "kwargs": {"cmd": "exit 9"}},
        {"name": "b", "depends_on": ["a"], "kwargs": {"cmd": "true"}},
    ])
    res = dagq.run("run", str(bad), timeout_s=90)
    assert res.returncode == 1, res.stderr
    wf = res.stdout.split()[0]
    assert dagq.status(wf)["status"] == "failed"
    assert dagq.statuses(wf) == {"a": "failed", "b": "upstream_failed"}


def test_run_example_diamond(dagq: Dagq) -> None:
    res = dagq.run("run", "examples/ml-pipeline/pipeline.yaml", "--workers", "2",
                   cwd=REPO, timeout_s=120)
    assert res.returncode == 0, res.stderr
    wf = res.stdout.split()[0]
    assert set(dagq.statuses(wf).values()) == {"completed"}
    compare = dagq.output(wf, "compare")
    assert compare["best"] in ("train-gnn", "train-rf") and compare["best_mae"] < 0.1

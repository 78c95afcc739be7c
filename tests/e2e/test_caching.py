"""The task cache end to end, through the real CLI with a coordinator and workers
(issue 29; docs/caching.md).

An execution is an attempt whose history record is not ``cached``: a task taken from
the cache has one record with result ``cached``, a task a rerun kept has none.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import REPO, Dagq, eventually, executions, sh_step

ML = REPO / "examples" / "ml-pipeline" / "pipeline.yaml"
ALL = {"featurize", "train-gnn", "train-rf", "compare", "deploy"}


def history(dagq: Dagq, wf: str) -> dict[str, list[dict[str, Any]]]:
    """Each task's attempt records, once every attempt has one (workers write theirs in
    batches, so they may come a moment after the workflow ended)."""
    def probe() -> dict[str, list[dict[str, Any]]] | None:
        rows = dagq.tasks(wf)
        done = all(any(a.get("attempt") == row["attempt"] and a.get("result") != "running"
                       for a in row.get("attempts") or [])
                   for row in rows.values() if row["attempt"] >= 1)
        return {name: row.get("attempts") or [] for name, row in rows.items()} if done \
            else None

    return eventually(probe, f"the attempt history of {wf}", 30.0, 0.25)


def executed(dagq: Dagq, wf: str) -> set[str]:
    """The tasks of ``wf`` that ran (an attempt not taken from the cache)."""
    return {name for name, recs in history(dagq, wf).items()
            if any(a.get("result") != "cached" for a in recs)}


def cached(dagq: Dagq, wf: str) -> set[str]:
    """The tasks of ``wf`` whose result came from the cache."""
    return {name for name, recs in history(dagq, wf).items()
            if any(a.get("result") == "cached" for a in recs)}


def finish(dagq: Dagq, path: Path, *args: str) -> str:
    """Submit ``path`` and wait for it to complete; its id."""
    wf = dagq.submit(path, *args)
    summary = dagq.wait_terminal(wf, deadline_s=120)
    assert summary["status"] == "completed", dagq.diagnostics(wf)
    return wf


def predicted(dagq: Dagq, path: Path, *args: str) -> set[str]:
    """The tasks ``dagq plan --json`` says will run (miss or runs)."""
    rows = dagq.json("plan", str(path), *args)
    return {r["task"] for r in rows if r["decision"] in ("miss", "runs")}


@pytest.fixture(scope="module")
def ml(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dagq]:
    """One store with a coordinator and the ml-pipeline's cpu and gpu workers."""
    d = Dagq(tmp_path_factory.mktemp("ml"))
    d.coordinator()
    d.worker("cpu", concurrency=2)
    d.worker("gpu", concurrency=1)
    yield d
    d.close()


def test_a_second_identical_run_of_the_ml_pipeline_executes_no_task(ml: Dagq) -> None:
    first = finish(ml, ML)
    second = finish(ml, ML)
    assert executed(ml, second) == set() and cached(ml, second) == ALL
    assert ml.output(second, "compare") == ml.output(first, "compare")
    assert ml.statuses(second) == dict.fromkeys(ALL, "completed")
    note = ml.ok("logs", second, "train-gnn").strip()
    source = ml.tasks(second)["train-gnn"]["attempts"][0]["cached_from"]
    assert note == (f"attempt 1 was taken from the cache: the result of {source} "
                    f"(dagq logs {source.split('/')[0]} train-gnn --attempt 1 shows what it "
                    "printed)")
    assert "train-gnn" in source and "epoch 4/4" in ml.ok(
        "logs", source.split("/")[0], "train-gnn", "--attempt", "1")


def test_changing_one_parameter_runs_exactly_what_the_plan_predicted(ml: Dagq) -> None:
    finish(ml, ML)
    assert predicted(ml, ML) == set()
    plan = {r["task"]: r for r in ml.json("plan", str(ML), "--param", "gnn_epochs=6")}
    assert plan["train-gnn"]["decision"] == "miss" and plan["train-gnn"]["changed"] == ["env"]
    assert plan["featurize"]["decision"] == plan["train-rf"]["decision"] == "hit"
    expected = predicted(ml, ML, "--param", "gnn_epochs=6")
    assert expected == {"train-gnn", "compare", "deploy"}
    wf = finish(ml, ML, "--param", "gnn_epochs=6")
    assert executed(ml, wf) == expected
    assert cached(ml, wf) == ALL - expected
    assert predicted(ml, ML, "--param", "gnn_epochs=6") == set()  # and now it is cached


def test_hits_survive_a_coordinator_restart(ml: Dagq) -> None:
    finish(ml, ML, "--param", "gnn_epochs=3")
    coordinator = next(p for p in ml.procs if p.name == "coordinator"
                       and p.popen.poll() is None)
    coordinator.stop()
    ml.coordinator()
    assert predicted(ml, ML, "--param", "gnn_epochs=3") == set()
    wf = finish(ml, ML, "--param", "gnn_epochs=3")
    assert executed(ml, wf) == set() and cached(ml, wf) == ALL


def test_no_cache_runs_every_task_and_stores_nothing(ml: Dagq) -> None:
    finish(ml, ML)
    keys = {r["key"] for r in ml.json("cache", "list")}
    wf = finish(ml, ML, "--no-cache")
    assert executed(ml, wf) == ALL and cached(ml, wf) == set()
    assert {r["key"] for r in ml.json("cache", "list")} == keys


def test_rerun_from_a_task_runs_it_and_what_follows_only(ml: Dagq) -> None:
    first = finish(ml, ML)
    # earlier tests on this store may have written featurize's entry: the rerun keeps it
    source = {e["task"]: e["workflow_id"] for e in ml.json("cache", "list")}["featurize"]
    res = ml.run("rerun", first, "--from", "train-rf", "--wait", timeout_s=180)
    assert res.returncode == 0, res.stderr
    wf = res.stdout.split()[0]
    assert executed(ml, wf) == {"train-rf", "compare", "deploy"}
    rows = ml.tasks(wf)
    assert rows["featurize"]["attempts"] == [] and rows["train-gnn"]["attempts"] == []
    assert ml.statuses(wf) == dict.fromkeys(ALL, "completed")
    logs = ml.run("logs", wf, "featurize")
    assert logs.returncode == 7 and "reused: the result of" in logs.stderr
    again = ml.run("rerun", first, "--wait", timeout_s=180)  # without --from: the cache
    assert again.returncode == 0, again.stderr
    assert executed(ml, again.stdout.split()[0]) == set()
    entries = {e["task"]: e for e in ml.json("cache", "list")}
    assert {entries[t]["workflow_id"] for t in ("train-rf", "compare")} == {wf}  # replaced
    assert entries["featurize"]["workflow_id"] == source
    # what --from ran again replaced its entries: a plain rerun of that run takes it all
    # from the cache too (the refresh it ran with is not carried over)
    third = ml.run("rerun", wf, "--wait", timeout_s=180)
    assert third.returncode == 0, third.stderr
    assert executed(ml, third.stdout.split()[0]) == set()


@pytest.fixture
def local(dagq: Dagq) -> Dagq:
    """A fresh store with a coordinator and a worker on the default queue."""
    dagq.coordinator()
    dagq.worker("default", concurrency=2)
    return dagq


def test_cache_commands_and_prune_with_and_without_cache(local: Dagq) -> None:
    log = local.root / "runs.log"
    big = "x" * 20_000  # stored under cache/, so it outlives its run
    path = local.define("small", [
        {"name": "a", "kwargs": {"cmd": sh_step(log, v=1)}},
        {"name": "big", "depends_on": ["a"], "kwargs": {
            "cmd": sh_step(log) + "; python -c 'print(chr(34) + 20000 * chr(120) + chr(34))' "
                                  "> $DAGQ_OUTPUT_FILE"}},
    ], cache=True)
    first = finish(local, path)
    entries = {r["task"]: r for r in local.json("cache", "list")}
    assert set(entries) == {"a", "big"}
    assert entries["big"]["stored"] == "object" and entries["big"]["source"] == f"{first}/big/1"
    shown = local.json("cache", "show", entries["a"]["key"])
    assert set(shown["components"]) >= {"command", "env", "inputs", "queue"}

    local.ok("prune", "--older-than", "0s")  # without --cache: entries stay and stay valid
    assert {r["task"] for r in local.json("cache", "list")} == {"a", "big"}
    second = finish(local, path)
    assert executed(local, second) == set()
    assert local.output(second, "big") == big

    local.ok("cache", "clear", "--task", "a")
    third = finish(local, path)
    assert executed(local, third) == {"a"}  # a's output is the same: big still hits
    assert [t for _, t, _ in executions(log)] == ["a", "big", "a"]

    # --cache removes what the runs pruned now made (a's entry from the third run);
    # big's entry came from a run pruned before without --cache and stays
    local.ok("prune", "--older-than", "0s", "--cache")
    assert [(r["task"], r["workflow_id"]) for r in local.json("cache", "list")] == [
        ("big", first)]
    fourth = finish(local, path)
    assert executed(local, fourth) == {"a"}
    local.ok("cache", "clear", "--all")
    fifth = finish(local, path)
    assert executed(local, fifth) == {"a", "big"}


def test_plan_and_run_agree_on_a_diamond_where_one_branch_changes(local: Dagq) -> None:
    log = local.root / "runs.log"
    path = local.define("diamond", [
        {"name": "a", "kwargs": {"cmd": sh_step(log, v=1)}},
        {"name": "b", "depends_on": ["a"],
         "kwargs": {"cmd": sh_step(log) + "; echo '{\"x\": {params.x}}' > $DAGQ_OUTPUT_FILE",
                    "env": {"Y": "{params.y}"}}},
        {"name": "c", "depends_on": ["a"], "kwargs": {"cmd": sh_step(log, v=3)}},
        {"name": "d", "depends_on": ["b", "c"],
         "kwargs": {"cmd": sh_step(log, v=4), "env": {"NOTE": "{params.note}"}}},
    ], cache=True, parameters={"x": {"type": "integer", "default": 1},
                               "y": {"type": "integer", "default": 1},
                               "note": {"type": "string", "default": "n"}})
    finish(local, path)
    rows = {r["task"]: r for r in local.json("plan", str(path), "--param", "x=2")}
    assert {t: r["decision"] for t, r in rows.items()} == {
        "a": "hit", "b": "miss", "c": "hit", "d": "runs"}
    assert rows["b"]["changed"] == ["command"] and "after b" in rows["d"]["reason"]
    expected = predicted(local, path, "--param", "x=2")
    wf = finish(local, path, "--param", "x=2")
    assert executed(local, wf) == expected == {"b", "d"}
    assert local.output(wf, "b") == {"x": 2}

    # only d's own env changes (against its newest entry, made just now): a miss naming it
    args = ("--param", "x=2", "--param", "note=m")
    rows = {r["task"]: r for r in local.json("plan", str(path), *args)}
    assert rows["d"]["decision"] == "miss" and rows["d"]["changed"] == ["env"]
    assert predicted(local, path, *args) == {"d"}
    wf = finish(local, path, *args)
    assert executed(local, wf) == {"d"}
    assert json.loads(local.ok("output", wf, "d"))["v"] == 4

    # the plan's one stated exception: b runs again (its env changed) but its output
    # comes out the same, so d, which the plan says runs, is taken from the cache
    more = (*args, "--param", "y=2")
    rows = {r["task"]: r for r in local.json("plan", str(path), *more)}
    assert rows["b"]["changed"] == ["env"] and rows["d"]["decision"] == "runs"
    wf = finish(local, path, *more)
    assert executed(local, wf) == {"b"} and cached(local, wf) == {"a", "c", "d"}

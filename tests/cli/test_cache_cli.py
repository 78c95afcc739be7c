"""The CLI of the task cache without workers: ``--no-cache``, ``cache.files`` digests,
``dagq plan`` on an empty or missing store, ``dagq cache list|show|clear``, ``prune
--cache`` and the refusals of ``dagq rerun`` (docs/caching.md)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from dagq.backends import open_backend
from dagq.cli.definitions import prepared, with_file_digests
from dagq.client import WorkflowClient
from dagq.compose.loader import load_file
from dagq.core.caching import policy_of, without_cache
from dagq.core.model import SubWorkflow, TaskDef, WorkflowDef
from dagq.errors import MissingFile
from dagq.protocol import cache
from tests.cli.kit import dagq, define, store_env

CACHED = """\
name: cached
cache: true
tasks:
  - name: a
    kwargs: {cmd: 'echo 1 > $DAGQ_OUTPUT_FILE'}
  - name: b
    depends_on: [a]
    cache: {files: [model.txt, code], version: "2"}
    kwargs: {cmd: 'true'}
"""


def _entry(key: str, task: str, run: str, created: float, output: object = None,
           workflow: str = "cached") -> cache.Entry:
    return cache.Entry(key, task, workflow, run, 1, created, cache.output_digest(output),
                       output, None, {"command": "c", "inputs": {}, "queue": "default"})


def _seed(tmp_path: Path, *entries: cache.Entry, big: bytes | None = None) -> None:
    backend = open_backend(f"sqlite:{tmp_path / 'x.db'}")
    for e in entries:
        data = big if big is not None and e.output is None else None
        assert cache.save(backend, e, data)
    backend.close()


def test_without_cache_turns_the_workflow_every_task_and_inline_children_off() -> None:
    child = WorkflowDef("child", (TaskDef("c", {"cmd": "true"}, cache=True),), cache=True)
    defn = WorkflowDef("p", (TaskDef("a", {"cmd": "true"}, cache={"max_age": "7d"}),
                             TaskDef("b", {"cmd": "true"}),
                             TaskDef("sub", workflow=SubWorkflow(child, "child.yaml"))),
                       cache=True)
    off = without_cache(defn)
    assert off.cache is False and [t.cache for t in off.tasks] == [False] * 3
    assert all(policy_of(t.cache, off.cache) is None for t in off.tasks)
    sub = off.tasks[2].workflow
    assert sub is not None and sub.definition is not None
    assert sub.definition.cache is False and sub.definition.tasks[0].cache is False
    assert defn.tasks[0].cache == {"max_age": "7d"}  # the input is left as it was


def test_cache_files_become_digests_relative_to_the_definition_file(tmp_path: Path) -> None:
    flows = tmp_path / "flows"
    (flows / "code").mkdir(parents=True)
    (flows / "model.txt").write_text("weights v1")
    (flows / "code" / "train.py").write_text("print(1)")
    path = define(flows, "c.yaml", CACHED)
    defn = with_file_digests(load_file(path), str(path))
    files = defn.tasks[1].cache["files"]  # type: ignore[index]
    assert set(files) == {"model.txt", "code"}
    assert files["model.txt"] == hashlib.sha256(b"weights v1").hexdigest()
    assert defn.tasks[1].cache["version"] == "2"  # type: ignore[index]
    policy = policy_of(defn.tasks[1].cache, defn.cache)
    assert policy is not None and policy.files == files
    before = files["code"]
    (flows / "code" / "train.py").write_text("print(2)")  # a file below a directory
    again = prepared(str(path), ())  # from another working directory: the same files
    assert again.tasks[1].cache["files"]["code"] != before  # type: ignore[index]
    assert again.tasks[1].cache["files"]["model.txt"] == files["model.txt"]  # type: ignore[index]


def test_a_missing_cache_file_names_the_task_and_the_path(tmp_path: Path) -> None:
    path = define(tmp_path, "c.yaml", CACHED)
    (tmp_path / "code").mkdir()
    with pytest.raises(MissingFile, match=r"task 'b': cache.files names 'model.txt'"):
        with_file_digests(load_file(path), str(path))
    env = store_env(tmp_path)
    for command in ("submit", "run", "plan"):
        out = dagq(env, command, str(path))
        assert out.returncode == 5, (command, out.stderr)
        assert "task 'b': cache.files names 'model.txt', which does not exist" in out.stderr
    assert not (tmp_path / "x.db").exists()  # nothing was written


def test_no_cache_is_submitted_with_the_cache_off(tmp_path: Path) -> None:
    path = define(tmp_path, "c.yaml", CACHED.replace("    cache: {files", "    # {files"))
    env = store_env(tmp_path)
    out = dagq(env, "submit", "--no-cache", "--id", "off", str(path))
    assert out.returncode == 0, out.stderr
    out = dagq(env, "submit", "--id", "on", str(path))
    assert out.returncode == 0, out.stderr
    backend = open_backend(env["DAGQ_STORE"])
    client = WorkflowClient(backend)
    off, on = client.state("off").definition, client.state("on").definition
    backend.close()
    assert off.cache is False and all(t.cache is False for t in off.tasks)
    assert on.cache is True


def test_plan_on_a_missing_store_says_nothing_is_cached_and_creates_none(
        tmp_path: Path) -> None:
    path = define(tmp_path, "c.yaml", CACHED.replace("    cache: {files", "    # {files"))
    env = store_env(tmp_path)
    out = dagq(env, "plan", str(path), "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [(r["task"], r["decision"]) for r in rows] == [("a", "miss"), ("b", "runs")]
    assert rows[0]["reason"] == "never cached" and rows[0]["key"]
    assert "after a, which runs" in rows[1]["reason"]
    assert "nothing is cached" in out.stderr
    assert not (tmp_path / "x.db").exists()
    plain = dagq(env, "plan", str(path))  # piped: task, decision, reason per line
    assert plain.stdout.splitlines()[0].split("\t")[:2] == ["a", "miss"]


def test_plan_checks_parameters_and_refuses_the_api(tmp_path: Path) -> None:
    path = define(tmp_path, "p.yaml", "name: p\ncache: true\nparameters:\n  n: {type: integer,"
                  " default: 1}\ntasks:\n  - {name: a, kwargs: {cmd: 'echo {params.n}'}}\n")
    env = store_env(tmp_path)
    assert dagq(env, "plan", str(path), "--param", "n=2").returncode == 0
    bad = dagq(env, "plan", str(path), "--param", "n=two")
    assert bad.returncode == 1 and "n" in bad.stderr
    api = dagq(env, "--api", "http://127.0.0.1:9", "plan", str(path))
    assert api.returncode == 2 and "not through --api" in api.stderr


def test_cache_list_show_and_clear(tmp_path: Path) -> None:
    _seed(tmp_path,
          _entry("k1" + "0" * 30, "a", "run-1", 1000.0, {"v": 1}),
          _entry("k2" + "0" * 30, "b", "run-1", 2000.0, None),
          _entry("k3" + "0" * 30, "a", "run-2", 4e9, {"v": 3}, workflow="other"),
          big=b'"' + b"x" * (cache.INLINE_BYTES + 10) + b'"')
    env = store_env(tmp_path)
    rows = json.loads(dagq(env, "cache", "list", "--json").stdout)
    assert [r["key"][:2] for r in rows] == ["k1", "k2", "k3"]  # oldest first
    assert rows[0]["source"] == "run-1/a/1" and rows[0]["created_at"].endswith("Z")
    assert rows[1]["stored"] == "object" and rows[1]["size"] == cache.INLINE_BYTES + 12
    only = json.loads(dagq(env, "cache", "list", "--json", "--task", "a",
                           "--workflow", "cached").stdout)
    assert [r["key"][:2] for r in only] == ["k1"]
    shown = json.loads(dagq(env, "cache", "show", "k2", "--json").stdout)
    assert shown["components"]["queue"] == "default" and shown["object"].startswith("cache/")
    text = dagq(env, "cache", "show", "k1").stdout
    assert "source: run-1/a/1 (dagq logs run-1 a --attempt 1)" in text and "command: c" in text
    assert dagq(env, "cache", "show", "k").returncode == 2  # starts three keys
    assert dagq(env, "cache", "show", "nope").returncode == 5

    refused = dagq(env, "cache", "clear")
    assert refused.returncode == 2 and "--all" in refused.stderr
    dry = dagq(env, "cache", "clear", "--older-than", "1d", "--dry-run")
    assert dry.stdout.split() == ["k1" + "0" * 30, "k2" + "0" * 30]
    assert "2 cache entries would be removed" in dry.stderr
    gone = dagq(env, "cache", "clear", "--older-than", "1d", "--task", "b")
    assert gone.returncode == 0 and gone.stdout.split() == ["k2" + "0" * 30]
    backend = open_backend(env["DAGQ_STORE"])
    assert not list(backend.outputs.list("cache/"))  # its stored output went with it
    assert backend.records.list(cache.task_partition("cached")) != []
    backend.close()
    assert dagq(env, "cache", "clear", "--all").stdout.split() == [
        "k1" + "0" * 30, "k3" + "0" * 30]
    assert json.loads(dagq(env, "cache", "list", "--json").stdout) == []


def test_cache_commands_create_no_store_and_refuse_the_api(tmp_path: Path) -> None:
    env = store_env(tmp_path)
    out = dagq(env, "cache", "list")
    assert out.returncode == 5 and "no store" in out.stderr
    assert not (tmp_path / "x.db").exists()
    api = dagq(env, "--api", "http://127.0.0.1:9", "cache", "list")
    assert api.returncode == 2 and "not through --api" in api.stderr


def test_prune_keeps_cache_entries_unless_asked(tmp_path: Path) -> None:
    backend = open_backend(f"sqlite:{tmp_path / 'x.db'}")
    client = WorkflowClient(backend, clock=lambda: 1000.0)
    defn = WorkflowDef("old", (TaskDef("a", {"cmd": "true"}),))
    for wf in ("old-1", "old-2"):
        client.submit(defn, workflow_id=wf)
        row = backend.index.get(wf)
        backend.index.update_progress(wf, status="completed", counts={"completed": 1},
                                      updated_at=row.updated_at)
    client.submit(defn, workflow_id="new")
    backend.close()
    _seed(tmp_path, _entry("a" * 32, "a", "old-1", 1000.0, 1),
          _entry("b" * 32, "a", "old-1~sub~1", 1000.0, 2),
          _entry("c" * 32, "a", "new", 1000.0, 3))
    env = store_env(tmp_path)
    out = dagq(env, "prune", "--older-than", "1s", "--dry-run", "--cache")
    assert out.stdout.split() == ["old-1", "old-2"] and "2 cache entries" in out.stderr
    assert len(json.loads(dagq(env, "cache", "list", "--json").stdout)) == 3
    help_text = dagq(env, "prune", "--help").stdout
    assert "stay valid" in help_text and "cache/" in help_text

    backend = open_backend(env["DAGQ_STORE"])
    client = WorkflowClient(backend, clock=lambda: 1000.0)
    client.submit(defn, workflow_id="old-3")
    backend.index.update_progress("old-3", status="completed", counts={"completed": 1},
                                  updated_at=1000.0)
    backend.close()
    _seed(tmp_path, _entry("d" * 32, "a", "old-3", 1000.0, 4))
    out = dagq(env, "prune", "--older-than", "1s", "--cache")
    assert out.returncode == 0 and "3 cache entries" in out.stderr, out.stderr
    left = json.loads(dagq(env, "cache", "list", "--json").stdout)
    assert [r["workflow_id"] for r in left] == ["new"]


def test_rerun_refuses_a_running_workflow_and_names_close_tasks(tmp_path: Path) -> None:
    path = define(tmp_path, "c.yaml", CACHED.replace("    cache: {files", "    # {files"))
    env = store_env(tmp_path)
    assert dagq(env, "submit", "--id", "w", str(path)).returncode == 0
    out = dagq(env, "rerun", "w")
    assert out.returncode == 2 and "workflow w is pending; wait for it to end" in out.stderr
    typo = dagq(env, "rerun", "w", "--from", "bb")
    assert typo.returncode == 5 and "did you mean 'b'?" in typo.stderr
    assert dagq(env, "rerun", "nope").returncode == 5
    assert dagq(env, "--api", "http://127.0.0.1:9", "rerun", "w").returncode == 2

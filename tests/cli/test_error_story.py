"""One error summary per attempt (issue 31, point 3): a failed attempt reads the same in
``dagq run``'s summary, ``status --json``, ``task --json`` (and its attempt records),
``explain --json``, ``watch`` and the HTTP task rows; the summary is an error-shaped
line of the output, else the exit line, never a plain output line like ``shard 3``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dagq.backends import open_backend
from dagq.cli.follow import frame
from dagq.client import WorkflowClient
from dagq.core.error_summary import clip_error, error_summary
from dagq.functions.http_api import http_blueprint
from dagq.functions.runtime import Runtime
from tests.cli.kit import dagq, define, store_env
from tests.functions.host import app_of, http, user_functions

STORY = """\
name: story
tasks:
  - name: boom
    kwargs: {cmd: "echo 'shard 3'; echo 'ValueError: bad row 42' >&2; echo 'shard 3 done'; exit 1"}
  - name: quiet
    kwargs: {cmd: "echo 'shard 3'; exit 1"}
  - name: traced
    kwargs: {cmd: "python3 -c 'import sys; print(\\"row 7\\"); raise KeyError(\\"id\\")'"}
"""
SUMMARY = {"boom": "ValueError: bad row 42", "quiet": "command exited with code 1",
           "traced": "KeyError: 'id'"}


@pytest.mark.slow
def test_every_view_shows_the_same_error_summary(tmp_path: Path) -> None:
    env = store_env(tmp_path)
    run = dagq(env, "run", "--id", "story-1", str(define(tmp_path, "s.yaml", STORY)))
    assert run.returncode == 1, run.stderr
    for name, line in SUMMARY.items():
        assert f"  {name} (attempt 1): {line}\n" in run.stderr
    status = json.loads(dagq(env, "status", "story-1", "--json").stdout)
    assert {t["name"]: t["error_line"] for t in status["tasks"]} == SUMMARY
    for name, line in SUMMARY.items():
        task = json.loads(dagq(env, "task", "story-1", name, "--json").stdout)
        assert task["error_line"] == line
        assert [a["error"] for a in task["attempts"]] == [line]  # the attempt record
        assert task["explanation"]["reasons"][0].endswith(f": {line}")
    explained = json.loads(dagq(env, "explain", "story-1", "--all", "--json").stdout)
    assert {e["task"] for e in explained} == set(SUMMARY)
    for e in explained:
        assert e["reasons"][0].endswith(f"ago: {SUMMARY[e['task']]}"), e
    backend = open_backend(env["DAGQ_STORE"])
    client = WorkflowClient(backend)
    view, _ = frame(client, client.summary("story-1"), True)  # dagq watch
    shown = "\n".join(str(line) for line in view.renderables)
    for name, line in SUMMARY.items():
        assert any(name in row and row.endswith(line) for row in shown.splitlines())
    backend.close()
    runtime = Runtime({"DAGQ_STORE": env["DAGQ_STORE"]})
    fns = user_functions(app_of(http_blueprint(runtime)))
    code, rows = http(fns["list_tasks"], "GET", "workflows/story-1/tasks",
                      route={"id": "story-1"})
    runtime.close()
    assert code == 200
    assert {t["name"]: t["error_line"] for t in rows["tasks"]} == SUMMARY


@pytest.mark.parametrize(("error", "summary"), [
    (None, None),
    ("", None),
    ("command exited with code 1\nshard 3", "command exited with code 1"),
    ("command exited with code 1\nshard 3\nshard 3 done", "command exited with code 1"),
    ("command exited with code 2\nTraceback (most recent call last):\n  File \"x.py\", "
     "line 3, in <module>\n    raise ValueError(\"bad row 42\")\nValueError: bad row 42\n",
     "ValueError: bad row 42"),
    ("command exited with code 1\nerror: config missing\nshard 3", "error: config missing"),
    ("command exited with code 128\nfatal: not a git repository", "fatal: not a git repository"),
    ("command exited with code 2\nmain.c:3:1: error: expected ';'\n1 error generated.",
     "main.c:3:1: error: expected ';'"),
    ("command exited with code 1\ncat: /data: No such file or directory\ndone",
     "cat: /data: No such file or directory"),
    ("command exited with code 1\nchecked: 0 errors\nshard 3", "command exited with code 1"),
    ("command was killed by signal 9\nepoch 3", "command was killed by signal 9"),
    ("command timed out after 5s\nValueError: late", "command timed out after 5s"),
    ("ValueError: bad input 2\nTraceback ...", "ValueError: bad input 2"),  # function task
    ("function m:f exited with code 1\nrequests.exceptions.HTTPError: 500",
     "requests.exceptions.HTTPError: 500"),
])
def test_the_summary_rule(error: str | None, summary: str | None) -> None:
    assert error_summary(error) == summary


def test_clipping_keeps_what_the_summary_reads() -> None:
    error = "command exited with code 1\n" + "shard 3\n" * 2000 + "ValueError: bad row 42"
    clipped = clip_error(error, 4000)
    assert len(clipped) <= 4000 and clipped.startswith("command exited with code 1\n")
    assert error_summary(clipped) == error_summary(error) == "ValueError: bad row 42"
    quiet = clip_error("command exited with code 1\n" + "shard 3\n" * 2000, 500)
    assert error_summary(quiet) == "command exited with code 1"

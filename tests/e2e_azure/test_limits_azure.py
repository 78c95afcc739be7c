"""Azure's limits on Azurite through the CLI: each exactly at the limit works end to end,
one over is refused at submit with a clear error and nothing written. Azurite runs with
``--loose`` and would accept more; dagq refuses what the real services would
(dagq.core.limits)."""

from __future__ import annotations

import json

import pytest

from dagq.core.limits import SEGMENT_MAX_CHARS, WORKFLOW_ID_MAX_CHARS, WORKFLOW_NAME_MAX_CHARS
from dagq.core.paths import dir_prefix, output_name
from dagq.ports import Backend
from tests.e2e.harness import Dagq

pytestmark = [pytest.mark.slow, pytest.mark.azurite]

EMIT = ("echo '{\"task\": \"'\"$DAGQ_TASK\"'\", \"pad\": \"'"
        "$(head -c 40000 /dev/zero | tr '\\0' x)'\"}' > \"$DAGQ_OUTPUT_FILE\"")
"""Publishes an output too large to inline (so it lands in Blob Storage under its task)."""


def _refused(az: Dagq, *args: str) -> str:
    res = az.run(*args)
    assert res.returncode == 1, f"stdout: {res.stdout}\nstderr: {res.stderr}"
    assert "Traceback" not in res.stderr
    return res.stderr


def test_workflow_id_at_the_limit_runs_and_one_over_is_refused(
        az: Dagq, az_backend: Backend) -> None:
    path = az.define("ids", [{"name": "a", "kwargs": {"cmd": EMIT}}])
    over = "w" * (WORKFLOW_ID_MAX_CHARS + 1)
    err = _refused(az, "submit", str(path), "--id", over)
    assert "201 characters long; the limit is 200" in err and over not in err
    assert list(az_backend.index.query()) == []

    at = "w" * WORKFLOW_ID_MAX_CHARS  # its derived ids exceed 128 and are shortened
    res = az.run("run", str(path), "--id", at, "--workers", "1", timeout_s=120)
    assert res.returncode == 0, az.diagnostics(at)
    assert az.output(at, "a")["task"] == "a"


def test_workflow_name_at_the_limit_is_accepted_and_a_huge_one_refused(
        az: Dagq, az_backend: Backend) -> None:
    task = [{"name": "a", "kwargs": {"cmd": "true"}}]
    assert az.submit(az.define("n" * WORKFLOW_NAME_MAX_CHARS, task))
    err = _refused(az, "submit", str(az.write("huge.yaml", json.dumps(
        {"name": "n" * 40_000, "tasks": task}))))
    assert "40000 characters long" in err and len(err) < 2000
    assert len(list(az_backend.index.query())) == 1


def test_task_names_at_the_encoded_limit_work_and_one_over_is_refused(az: Dagq) -> None:
    at = "é" * (SEGMENT_MAX_CHARS // 6)  # 600 characters once encoded
    err = _refused(az, "validate", str(az.define("long", [
        {"name": at + "é", "kwargs": {"cmd": "true"}}])))
    assert "tasks[0].name" in err and f"the limit is {SEGMENT_MAX_CHARS}" in err
    path = az.define("long", [{"name": at, "kwargs": {"cmd": EMIT}}])
    res = az.run("run", str(path), "--id", "long-1", "--workers", "1", timeout_s=120)
    assert res.returncode == 0, az.diagnostics("long-1")
    assert az.output("long-1", at)["task"] == at


def test_dot_and_slash_task_names_keep_their_own_objects(
        az: Dagq, az_backend: Backend) -> None:
    names = ["x", "x.", "a/.../b", "b", "ck", "ck/x"]  # "a/../b" is refused
    tasks = [{"name": n, "kwargs": {  # each task its own local directory d{i}
        "cmd": f"mkdir -p d{i} && echo \"$DAGQ_TASK\" > d{i}/who.txt; {EMIT}",
        "bg_dirsync_to": f"d{i}"}} for i, n in enumerate(names)]
    path = az.define("dots", tasks)
    res = az.run("run", str(path), "--id", "dots-1", "--workers", "2", timeout_s=180)
    assert res.returncode == 0, az.diagnostics("dots-1")
    for n in names:  # each output and each synced directory is the task's own
        assert az.output("dots-1", n)["task"] == n
        assert az_backend.outputs.get(output_name("dots-1", n, 1))
        listing = json.loads(az.ok("files", "dots-1", n, "--json"))
        assert [e["path"] for e in listing] == ["who.txt"], (n, listing)
        got = az_backend.outputs.get(dir_prefix("dots-1", n) + "who.txt").decode().strip()
        assert got == n

"""Python function tasks and custom processors end to end through the real ``dagq`` CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dagq.compose import Chain, Group, Workflow, task
from dagq.core.kinds import registered_kind
from examples.python.build_workflow import build as build_example
from tests.compose.sample_tasks import (
    ShoutProcessor,
    add,
    boom,
    fetch,
    numbers,
    scale,
    sleeper,
    total,
)
from tests.e2e.harness import REPO, Dagq, eventually, pid_alive

pytestmark = pytest.mark.slow
PYTHONPATH = {"PYTHONPATH": str(REPO)}
"""Lets processes started in the store's directory import the test modules."""


def write(dagq: Dagq, wf: Workflow) -> Path:
    return dagq.write(f"{wf.name}.yaml", wf.to_yaml())


def test_a_chain_and_group_of_functions_passes_outputs(dagq: Dagq) -> None:
    wf = Workflow("outputs", Chain(
        task(numbers, name="nums", n=4),
        Group(task(scale, factor=2), task(scale, factor=3)),
        task(total),
        task(fetch, source="total"),
    ))
    # run from the repository: the worker's working directory is on the functions' path
    res = dagq.run("run", str(write(dagq, wf)), "--id", "wf-outputs", cwd=REPO)
    assert res.returncode == 0, res.stderr
    assert dagq.output("wf-outputs", "nums") == [0, 1, 2, 3]
    assert dagq.output("wf-outputs", "scale_1") == {"nums": [0, 2, 4, 6]}
    assert dagq.output("wf-outputs", "scale_2") == {"nums": [0, 3, 6, 9]}
    assert dagq.output("wf-outputs", "total") == 30
    assert dagq.output("wf-outputs", "fetch") == {"from": "total", "value": 30}


def test_a_raising_function_fails_with_its_exception(dagq: Dagq) -> None:
    wf = Workflow("raises", Chain(task(boom, message="row 42 is bad"), task(add, a=1)))
    res = dagq.run("run", str(write(dagq, wf)), "--id", "wf-raises", cwd=REPO)
    assert res.returncode == 1
    rows = dagq.tasks("wf-raises")
    assert rows["boom"]["status"] == "failed"
    assert rows["boom"]["error"].startswith("ValueError: row 42 is bad\n")
    assert "raise ValueError(message)" in rows["boom"]["error"]
    assert rows["add"]["status"] == "upstream_failed"
    assert dagq.status("wf-raises")["status"] == "failed"


def test_an_unimportable_function_fails_clearly_without_hanging(dagq: Dagq) -> None:
    wf = Workflow("unimportable", task("train", call="no_such_pkg.models:train",
                                       args={"epochs": 1}, num_retries=1))
    res = dagq.run("run", str(write(dagq, wf)), "--id", "wf-import", cwd=REPO, timeout_s=120)
    assert res.returncode == 1
    row = dagq.tasks("wf-import")["train"]
    assert (row["status"], row["attempt"]) == ("failed", 2)
    assert row["error"].splitlines()[0] == ("cannot import 'no_such_pkg.models:train': "
                                            "ModuleNotFoundError: No module named 'no_such_pkg'")
    assert dagq.status("wf-import")["status"] == "failed"


def test_cancelling_a_running_function_task_kills_its_process(dagq: Dagq, tmp_path: Path) -> None:
    pid_file = tmp_path / "sleeper.pid"
    dagq.task_pids.append(pid_file)
    wf = Workflow("cancel", Chain(task(sleeper, pid_file=str(pid_file), seconds=600),
                                  task(add, a=1)))
    run = dagq.start("run", "run", str(write(dagq, wf)), "--id", "wf-cancel", env=PYTHONPATH)
    pid = eventually(lambda: int(pid_file.read_text()) if pid_file.exists()
                     and pid_file.read_text() else None, "the function to write its pid")
    assert pid_alive(pid)
    dagq.ok("cancel", "wf-cancel")
    assert run.wait(60) == 3, run.text()  # the workflow ended cancelled
    assert dagq.status("wf-cancel")["status"] == "cancelled"
    assert dagq.statuses("wf-cancel") == {"sleeper": "cancelled", "add": "cancelled"}
    assert not pid_alive(pid)


def test_a_custom_processor_registered_by_import_path_runs_tasks(dagq: Dagq) -> None:
    wf = Workflow("custom", Chain(
        task("hello", shout="hello"),
        Group(task("world", shout="world"), task(add, a=2, b=3)),
    ))
    kinds = {**PYTHONPATH, "DAGQ_TASK_KINDS": "tests.compose.sample_tasks:ShoutProcessor"}
    dagq.coordinator(env=kinds)
    worker = dagq.start("worker", "worker", "default", "--concurrency", "2",
                        "--processor", "tests.compose.sample_tasks:ShoutProcessor",
                        env=PYTHONPATH)
    with registered_kind(ShoutProcessor.task_kind):  # the processor declares its keys
        path = write(dagq, wf)
    refused = dagq.run("submit", str(path), env=PYTHONPATH)
    assert refused.returncode == 1 and "this task runs nothing" in refused.stderr
    wf_id = dagq.run("submit", str(path), "--id", "wf-custom", env=kinds).stdout.strip()
    assert dagq.wait_terminal(wf_id)["status"] == "completed", dagq.diagnostics(wf_id)
    assert dagq.output(wf_id, "hello") == {"text": "HELLO", "upstream": [],
                                           "pid": worker.popen.pid}
    assert dagq.output(wf_id, "world")["upstream"] == ["hello"]
    assert dagq.output(wf_id, "add") == 5  # the built-in processors still run the rest


def test_a_processor_that_cannot_be_imported_stops_the_worker_with_a_clear_error(
        dagq: Dagq) -> None:
    res = dagq.run("worker", "default", "--processor", "no_such_pkg:Proc")
    assert res.returncode != 0
    assert "'no_such_pkg:Proc' cannot be imported" in res.stderr


def test_the_python_example_is_current_and_runs(dagq: Dagq) -> None:
    checked_in = REPO / "examples" / "python" / "pipeline.yaml"
    assert checked_in.read_text() == build_example().to_yaml(), (
        "regenerate it: python -m examples.python.build_workflow > "
        "examples/python/pipeline.yaml")
    printed = subprocess.run([sys.executable, "-m", "examples.python.build_workflow"],
                             cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert printed == checked_in.read_text()
    res = dagq.run("run", str(checked_in), "--id", "wf-example", cwd=REPO)
    assert res.returncode == 0, res.stderr
    assert dagq.output("wf-example", "pick_best")["best"] == "linear"
    assert dagq.output("wf-example", "report").startswith("python example: linear wins")

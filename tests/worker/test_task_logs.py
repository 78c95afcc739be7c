"""Task logs and attempt history through the real ``dagq`` processes, on the embedded
store and on Azurite: what successful, failed, retried, cancelled and preempted attempts
printed is readable after the run; ``--follow`` shows a running task's lines; a task
printing 100 MB leaves the worker small, its temporary directory empty and the stored
log capped."""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import DAGQ, eventually
from tests.worker.stack import SCRIPTS, Stack, wait_file

pytestmark = pytest.mark.slow
PY = sys.executable
CHATTY = f"{PY} {SCRIPTS / 'chatty.py'}"
QUICK_LOGS = {"DAGQ_LOG_FLUSH_INTERVAL": "0.3"}


def _history(stack: Stack, wf: str, task: str, runs: int) -> list[dict[str, Any]]:
    """The task's attempt records once ``runs`` of them have ended (they are written in
    the background, a moment after the attempt's completion)."""
    def probe() -> list[dict[str, Any]] | None:
        recs: list[dict[str, Any]] = stack.client.task(wf, task)["attempts"]
        return recs if len(recs) == runs and all(r["ended_at"] for r in recs) else None

    return eventually(probe, f"{runs} ended attempt record(s) of {task}", 30)


def _logs(stack: Stack, *args: str) -> str:
    res = stack.run("logs", *args)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_success_failure_retries_and_why_a_task_did_not_run(stack: Stack) -> None:
    (stack.root / "brittle.py").write_text(
        "def explode():\n    print('about to fail', flush=True)\n"
        "    raise ValueError('the function broke')\n")
    stack.coordinator()
    worker = stack.worker("default", "--log-format", "json")
    fail = ('echo "attempt $DAGQ_ATTEMPT says hi"; '
            'echo "ValueError: bad input $DAGQ_ATTEMPT" >&2; exit 3')
    wf = stack.submit("logs", [
        {"name": "ok", "kwargs": {"cmd": "printf 'hello\\nworld\\n'"}},
        {"name": "boom", "num_retries": 1, "kwargs": {"cmd": fail}},
        {"name": "after", "depends_on": ["boom"], "kwargs": {"cmd": "echo never"}},
        {"name": "fn", "kwargs": {"call": "brittle:explode"}},
    ])
    assert stack.wait_terminal(wf) == "failed"
    _history(stack, wf, "boom", 2)
    _history(stack, wf, "ok", 1)
    [fn] = _history(stack, wf, "fn", 1)

    # a function task's log has what it printed and its traceback
    fn_log = _logs(stack, wf, "fn")
    assert fn_log.startswith("about to fail\nTraceback (most recent call last):")
    assert "raise ValueError('the function broke')" in fn_log
    assert fn["error"] == "ValueError: the function broke" and fn["exit_code"] == 1

    assert _logs(stack, wf, "ok") == "hello\nworld\n"
    assert _logs(stack, wf, "ok", "--tail", "1") == "world\n"
    for n in (1, 2):
        assert _logs(stack, wf, "boom", "--attempt", str(n)) == (
            f"attempt {n} says hi\nValueError: bad input {n}\n")
    assert "bad input 2" in _logs(stack, wf, "boom")  # the latest by default
    every = _logs(stack, wf, "boom", "--all")
    assert re.search(r"==> boom attempt 1: failed on .+ <==\nattempt 1 says hi", every)
    assert every.index("bad input 1") < every.index("==> boom attempt 2") < every.index(
        "bad input 2")

    rows = {t["name"]: t for t in json.loads(stack.run(
        "tasks", "--workflow", wf, "--json").stdout)}
    boom = rows["boom"]["attempts"]
    assert [(a["attempt"], a["result"], a["exit_code"], a["error"]) for a in boom] == [
        (1, "failed", 3, "ValueError: bad input 1"), (2, "failed", 3, "ValueError: bad input 2")]
    assert all(a["worker"] and a["duration_s"] is not None and a["ended_at"] >= a["started_at"]
               for a in boom)
    assert "attempt 1 says hi" in boom[0]["error_tail"]
    assert rows["ok"]["attempts"][0]["log"] == {"printed": 12, "stored": 12, "truncated": False}
    assert rows["after"]["attempts"] == []
    assert rows["after"]["reason"] == "upstream failed: boom (failed)"
    assert rows["boom"]["error_line"] == "ValueError: bad input 2"

    table = stack.run("tasks", "--workflow", wf).stdout
    assert "ValueError: bad input 2" in table and "upstream failed: boom" in table
    detail = stack.run("task", wf, "boom").stdout
    assert "error line: ValueError: bad input 2" in detail
    assert f"dagq logs {wf} boom --all" in detail

    # bad input: clear messages, the exit codes of dagq.cli.exits, no traceback
    for args, message, code in [((wf, "nope"), "has no task 'nope'", 5),
                                ((wf, "boom", "--attempt", "7"), "has no attempt 7", 5),
                                ((wf, "after"), "never ran", 7)]:
        res = stack.run("logs", *args)
        assert (res.returncode, "Traceback" in res.stderr) == (code, False), res.stderr
        assert message in res.stderr, res.stderr
    assert stack.run("logs", wf, "boom", "--all", "--attempt", "1").returncode == 2  # usage

    # the worker logged one JSON line per task start and end
    events = [json.loads(line) for line in worker.text().splitlines() if line.startswith("{")]
    ends = [(e["task"], e["attempt"], e["result"]) for e in events if e["event"] == "task_end"]
    assert sorted(ends) == [("boom", 1, "failed"), ("boom", 2, "failed"), ("fn", 1, "failed"),
                            ("ok", 1, "succeeded")]
    assert sum(e["event"] == "task_start" for e in events) == 4
    assert all(e["workflow_id"] == wf and e["worker"] for e in events)


def test_follow_shows_lines_of_a_running_task_and_a_cancelled_attempt_keeps_its_log(
        stack: Stack) -> None:
    probe = stack.root / "probe"
    probe.mkdir()
    stack.coordinator()
    stack.worker("default", "--concurrency", "2", env=QUICK_LOGS)
    wf = stack.submit("follow", [
        {"name": "talk", "kwargs": {"cmd": f"{CHATTY} wait {probe}"}},
        {"name": "hang", "kwargs": {"cmd": "echo started; sleep 60"}},
    ])
    follow = subprocess.Popen([str(DAGQ), "logs", wf, "talk", "--follow"],
                              env=stack.dagq.env(), stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(follow.stdout.readline, "")),
                              daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        # the task cannot end before "go" exists: "first" arrives while it runs
        eventually(lambda: "first\n" in lines or None, "--follow to print 'first'", 30)
        assert follow.poll() is None
        (probe / "go").write_text("")
        assert follow.wait(30) == 0
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    reader.join(5)
    assert lines == ["first\n", "second\n"]

    eventually(lambda: b"started" in stack.client.logs(wf, "hang").data or None,
               "the hanging task's first line to be stored", 30)
    stack.run("cancel", wf)
    assert stack.wait_terminal(wf) == "cancelled"
    text = _logs(stack, wf, "hang")
    assert text.startswith("started\n") and "the workflow was cancelled" in text
    [record] = _history(stack, wf, "hang", 1)
    assert record["result"] == "cancelled"


def test_a_preempted_attempt_keeps_both_runs_in_its_log(stack: Stack) -> None:
    probe = stack.root / "probe"
    probe.mkdir()
    stack.coordinator()
    a = stack.worker("spot")
    wf = stack.submit("preempt", [{"name": "train", "kwargs": {
        "cmd": f"{CHATTY} preempt {probe}"}}], default_queue="spot")
    wait_file(probe / "first")
    b = stack.worker("spot")
    stack.wait_heartbeat(b)
    a.popen.send_signal(signal.SIGTERM)
    assert a.wait(30) == 0, a.text()
    assert stack.wait_terminal(wf, deadline_s=30) == "completed"

    text = _logs(stack, wf, "train")
    assert re.fullmatch(r"run-1 attempt 1\ngot SIGTERM\n\n\[dagq: released by worker \S+ "
                        r"\(shutting down or preempted\); the same attempt runs again\]\n"
                        r"run-2 attempt 1\n", text), text
    runs = _history(stack, wf, "train", 2)
    assert [(r["attempt"], r["run"], r["result"], r["released"]) for r in runs] == [
        (1, 0, "released", True), (1, 1, "succeeded", False)]
    assert runs[0]["worker"] != runs[1]["worker"]


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


def test_a_task_printing_100_mb_leaves_a_small_worker_no_files_and_a_capped_log(
        stack: Stack) -> None:
    tmp = stack.root / "worker-tmp"
    tmp.mkdir()
    cap = 1024 * 1024
    stack.coordinator()
    worker = stack.worker("default", env={"TMPDIR": str(tmp), "DAGQ_LOG_MAX_BYTES": str(cap),
                                          **QUICK_LOGS})
    wf = stack.submit("flood", [{"name": "flood", "kwargs": {
        "cmd": f"{CHATTY} flood {tmp} 100"}}])
    assert stack.wait_terminal(wf, deadline_s=120) == "completed"

    assert _peak_rss_kib(worker.popen.pid) < 100 * 1024
    # nothing of the task is left (its workdir goes on the worker's pacer, moments after
    # the completion is sent); the worker's own liveness file stays while it runs
    def leftovers() -> list[Path]:
        return [p for p in tmp.rglob("*") if p.is_file() and p.suffix != ".alive"]

    eventually(lambda: not leftovers(), "the task's files to be removed", 10)
    stored = stack.backend.outputs.list(f"logs/{wf}/flood/1/")
    assert sum(size for _, size, _ in stored) <= cap + 200  # the marker line
    text = _logs(stack, wf, "flood")
    assert text.startswith("line 00000000 ")
    assert re.search(r"\n\[dagq: \d+ bytes left out here; an attempt's stored log keeps its "
                     r"first 524288 and last 524288 bytes \(DAGQ_LOG_MAX_BYTES=1048576\)\]\n",
                     text)
    assert text.endswith("line 00999999 " + "x" * 85 + "\nEND-OF-FLOOD\n")
    [record] = _history(stack, wf, "flood", 1)
    assert record["log"]["printed"] == 100_000_013 and record["log"]["truncated"] is True


def test_child_logs_are_read_by_child_id_and_prune_removes_everything(stack: Stack) -> None:
    stack.coordinator()
    stack.worker("default", "--concurrency", "2")
    big = "python -c \"from dagq.task import set_output; set_output({'pad': 'x' * 40000})\""
    wf = stack.submit("family", [
        {"name": "hello", "kwargs": {"cmd": f"echo parent says hi; {big}"}},
        {"name": "child", "depends_on": ["hello"], "workflow": {"name": "kid", "tasks": [
            {"name": "inner", "kwargs": {"cmd": "echo child says hi"}}]}},
    ])
    assert stack.wait_terminal(wf) == "completed"
    [child_id] = [r.id for r in stack.client.descendants(wf)]
    assert _logs(stack, child_id, "inner") == "child says hi\n"
    assert _logs(stack, wf, "hello") == "parent says hi\n"
    hint = stack.run("logs", wf, "child")
    assert hint.returncode == 0 and hint.stdout == ""
    assert (f"runs child workflow {child_id}: its tasks' logs are "
            f"`dagq logs {shlex.quote(child_id)} TASK`") in hint.stderr
    _history(stack, child_id, "inner", 1)
    out = stack.backend.outputs
    assert out.list(f"outputs/{wf}/") and out.list(f"logs/{wf}/") and out.list(f"logs/{child_id}/")

    kept = stack.run("prune", "--older-than", "1h")
    assert kept.returncode == 0 and kept.stdout == ""
    dry = stack.run("prune", "--older-than", "0s", "--dry-run")
    assert dry.stdout.split() == [wf] and stack.client.row(wf)
    gone = stack.run("prune", "--older-than", "0s")
    assert gone.returncode == 0 and gone.stdout.split() == [wf], gone.stderr
    assert "removed 1 workflow(s) (2 with children" in gone.stderr
    for member in (wf, child_id):
        assert stack.backend.index.query() == []
        assert list(stack.backend.states.list_ids(member)) == []
        assert stack.backend.records.list(f"attempts~{member}") == []
        for kind in ("outputs", "files", "dirs", "inputs", "logs"):
            assert out.list(f"{kind}/{member}/") == [], (kind, member)
    res = stack.run("logs", wf, "hello")
    assert res.returncode == 5 and "no workflow" in res.stderr
    bad = stack.run("prune", "--older-than", "soon")
    assert bad.returncode == 2 and "'soon' is not an age" in bad.stderr  # a usage error

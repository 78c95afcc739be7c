"""`dagq logs` (issue 31, point 5): a task that has not started says so and exits 7;
`--follow` goes on into later attempts; `--timestamps`; `--json`; without a task, every
task's lines prefixed by the task (`-f` follows them all)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from dagq.cli.exits import NOT_STARTED
from tests.cli.kit import dagq, define, eventually, is_iso_utc, start, store_env, submit_dispatched

TWO = ("name: two\ntasks:\n  - name: a\n    kwargs: {cmd: 'echo hello; echo more'}\n"
       "  - name: b\n    depends_on: [a]\n    kwargs: {cmd: 'printf world'}\n"
       "  - name: never\n    depends_on: [a]\n    condition: inputs.a.x == 1\n"
       "    kwargs: {cmd: 'echo no'}\n")
FLAKY = ("name: flaky\ntasks:\n  - name: f\n    num_retries: 2\n    retry_backoff_s: 0.5\n"
         "    kwargs: {cmd: 'sleep 1; echo \"try $DAGQ_ATTEMPT\"; test $DAGQ_ATTEMPT -ge 3'}\n")


def test_a_task_that_has_not_started_says_so(tmp_path: Path) -> None:
    env = store_env(tmp_path)
    path = define(tmp_path, "wf.yaml", "name: q\ntasks:\n  - name: a\n    queue: nobody\n"
                  "    kwargs: {cmd: 'echo hi'}\n  - name: b\n    depends_on: [a]\n"
                  "    kwargs: {cmd: 'echo hi'}\n")
    submit_dispatched(env, path, "q-1")
    out = dagq(env, "logs", "q-1", "a")  # attempt 1 is queued: no worker took it
    assert out.returncode == NOT_STARTED and out.stdout == ""
    assert "no worker has started it" in out.stderr and "'nobody'" in out.stderr
    out = dagq(env, "logs", "q-1", "b")
    assert out.returncode == NOT_STARTED and "has not started yet" in out.stderr


def test_a_skipped_task_never_ran_and_whole_workflow_logs_are_prefixed(
        tmp_path: Path) -> None:
    env = store_env(tmp_path)
    assert dagq(env, "run", str(define(tmp_path, "two.yaml", TWO)), "--id", "two-1") \
        .returncode == 0
    out = dagq(env, "logs", "two-1", "never")
    assert out.returncode == NOT_STARTED and "never ran (status skipped" in out.stderr
    out = dagq(env, "logs", "two-1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["a | hello", "a | more", "b | world"]
    out = dagq(env, "logs", "two-1", "a", "--timestamps")
    stamps = [line.split(" ", 1) for line in out.stdout.splitlines()]
    assert [text for _, text in stamps] == ["hello", "more"]
    assert all(is_iso_utc(stamp) for stamp, _ in stamps)
    records = [json.loads(line) for line in dagq(env, "logs", "two-1", "--json")
               .stdout.splitlines()]
    assert records[0] == {"workflow": "two-1", "task": "a", "attempt": 1, "line": "hello"}
    assert [r["task"] for r in records] == ["a", "a", "b"]


def test_follow_goes_on_into_the_next_attempts(tmp_path: Path) -> None:
    env = store_env(tmp_path)
    run = start(env, "run", str(define(tmp_path, "flaky.yaml", FLAKY)), "--id", "fl-1")
    try:
        eventually(lambda: dagq(env, "status", "fl-1").returncode == 0, "the submission")
        out = dagq(env, "logs", "fl-1", "f", "--follow", timeout=90)
        assert out.returncode == 0, out.stderr
        assert re.findall(r"try \d", out.stdout) == ["try 1", "try 2", "try 3"], out.stdout
        assert "==> f attempt 2" in out.stdout
    finally:
        run.communicate(timeout=90)


def test_follow_without_a_task_follows_every_task_to_the_end(tmp_path: Path) -> None:
    env = store_env(tmp_path)
    text = ("name: both\ntasks:\n  - name: slow\n    kwargs: {cmd: 'echo one; sleep 2; "
            "echo two'}\n  - name: after\n    depends_on: [slow]\n"
            "    kwargs: {cmd: 'echo three'}\n")
    run = start(env, "run", str(define(tmp_path, "both.yaml", text)), "--id", "both-1")
    try:
        eventually(lambda: dagq(env, "status", "both-1").returncode == 0, "the submission")
        out = dagq(env, "logs", "both-1", "-f", timeout=90)
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines() == ["slow | one", "slow | two", "after | three"]
    finally:
        run.communicate(timeout=90)

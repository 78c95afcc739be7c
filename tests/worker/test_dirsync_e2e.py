"""``bg_dirsync_to`` through the real ``dagq worker``: files synced while the task runs,
after it ends (also when it fails or is cancelled), fetched by a downstream task and by
``dagq files``; uploads counted from the worker's stats record."""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from typing import Any

import pytest

from dagq.worker.dirsync import dir_prefix
from tests.e2e.harness import eventually
from tests.worker.stack import SCRIPTS, Stack, wait_file

pytestmark = pytest.mark.slow
PY = sys.executable
FINAL = {"a.txt": "second a", "sub/b.txt": "b", "c.txt": "c"}
FETCH = ("from pathlib import Path; from dagq.task import fetch_dir, set_output; "
         "set_output({p.relative_to(Path('got').absolute()).as_posix(): p.read_text() "
         "for p in fetch_dir('train', 'got')})")


def md5(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def writer(stack: Stack, task: str, mode: str, sync: object) -> dict[str, Any]:
    """A task running scripts/writer.py in its own working directory."""
    cwd = stack.root / f"work-{task}"
    cwd.mkdir()
    return {"name": task, "kwargs": {"cmd": f"{PY} {SCRIPTS / 'writer.py'} {stack.root} {mode}",
                                     "cwd": str(cwd), "bg_dirsync_to": sync}}


def test_files_are_synced_while_running_and_after(stack: Stack) -> None:
    stats = stack.root / "stats.jsonl"
    stack.coordinator()
    worker = stack.worker("default", env={"DAGQ_STATS_FILE": str(stats)})
    (stack.root / "work-resume").mkdir()
    wf = stack.submit("sync", [
        writer(stack, "train", "ok", {"path": "out", "every_s": 0.3}),
        {"name": "resume", "depends_on": ["train"],
         "kwargs": {"cmd": f"{PY} -c {shlex.quote(FETCH)}",
                    "cwd": str(stack.root / "work-resume")}},
    ])
    prefix = dir_prefix(wf, "train")
    # seen from outside while the task still waits for "go"
    def two_synced() -> dict[str, str] | None:
        synced = stack.synced(prefix)
        return synced if len(synced) == 2 else None

    # seen from outside while the task still waits for "go"
    early = eventually(two_synced, "the first two files to be synced", 30)
    assert early == {"a.txt": md5("first a"), "sub/b.txt": md5("b")}
    assert stack.client.row(wf).status == "running"
    (stack.root / "go").write_text("1")

    assert stack.wait_terminal(wf) == "completed", stack.tasks(wf)["resume"]["error"]
    assert stack.synced(prefix) == {name: md5(text) for name, text in FINAL.items()}
    assert stack.client.output(wf, "resume") == FINAL

    listed = json.loads(stack.dagq.ok("files", wf, "train", "--json"))
    assert listed == [{"path": p, "size": len(FINAL[p]), "md5": md5(FINAL[p])}
                      for p in sorted(FINAL)]
    assert "sub/b.txt" in stack.dagq.ok("files", wf, "train")
    stack.dagq.ok("files", wf, "train", "--get", str(stack.root / "fetched"))
    assert {p.relative_to(stack.root / "fetched").as_posix(): p.read_text()
            for p in (stack.root / "fetched").rglob("*") if p.is_file()} == FINAL

    # a, b, then c and the new a: nothing unchanged was sent again, however many rounds ran
    assert worker.stop() == 0
    record = json.loads(stats.read_text().splitlines()[-1])
    assert record["role"] == "worker"
    assert record["counts"]["dirsync_uploads"] == 4, record
    assert record["counts"]["dirsync_unchanged"] > 0, record


def test_failed_and_cancelled_tasks_sync_their_last_state(sqlite_stack: Stack) -> None:
    """Rounds are a minute apart, so only the sync at the end can have sent the files."""
    stack = sqlite_stack
    stack.coordinator()
    stack.worker("default", "--concurrency", "2")
    wf = stack.submit("ends", [
        writer(stack, "fail", "fail", {"path": "out", "every_s": 60, "dest": "postmortem"}),
        writer(stack, "hang", "hang", {"path": "out", "every_s": 60}),
    ])
    wait_file(stack.root / "ready")
    eventually(lambda: stack.tasks(wf)["fail"]["status"] == "failed", "task fail to fail", 30)
    assert stack.synced(dir_prefix(wf, "postmortem")) == {"x.txt": md5("last words")}
    assert stack.synced(dir_prefix(wf, "fail")) == {}

    stack.dagq.ok("cancel", wf)
    assert stack.wait_terminal(wf) == "cancelled"
    assert eventually(lambda: stack.synced(dir_prefix(wf, "hang")) or None,
                      "the cancelled task's last sync", 30) == {"y.txt": md5("partial")}


def test_files_of_an_unknown_workflow_is_a_clear_error(sqlite_stack: Stack) -> None:
    res = sqlite_stack.run("files", "no-such-id", "train")
    assert res.returncode == 5  # not found
    assert "no workflow with id 'no-such-id'" in res.stderr

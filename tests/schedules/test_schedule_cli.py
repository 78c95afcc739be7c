"""``dagq schedule ...`` and ``dagq scheduler`` through the real ``dagq`` executable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.schedules.conftest import WORKFLOW_YAML

DAGQ = str(Path(sys.executable).with_name("dagq"))
DEADLINE_S = 60.0


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DAGQ_")}
    return {**clean, "DAGQ_STORE": f"sqlite:{tmp_path / 'x.db'}"}


@pytest.fixture
def flow(tmp_path: Path) -> str:
    path = tmp_path / "report.yaml"
    path.write_text(WORKFLOW_YAML)
    return str(path)


Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def dagq(env: dict[str, str], tmp_path: Path) -> Run:
    def run(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([DAGQ, *args], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=DEADLINE_S)
        if ok:
            assert done.returncode == 0, done.stderr
        return done
    return run


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(done.stdout)


def test_add_list_show_next_pause_resume_remove(dagq: Run, flow: str) -> None:
    added = dagq("schedule", "add", "nightly", "--cron", "0 0 2 * * *", flow, "--timezone",
                 "Europe/Berlin", "--overlap", "cancel_previous", "--catchup", "latest",
                 "--param", "n=3", "--param", "region=eu", "--param", 'tags=["a", "b"]')
    assert added.stdout.strip() == "nightly" and "next run at" in added.stderr
    [row] = as_json(dagq("schedule", "list", "--json"))
    assert row["name"] == "nightly" and row["workflow"] == "report"
    assert (row["cron"], row["timezone"], row["overlap"], row["catchup"]) == (
        "0 0 2 * * *", "Europe/Berlin", "cancel_previous", "latest")
    assert row["params"] == {"n": 3, "region": "eu", "tags": ["a", "b"]}
    assert (row["paused"], row["last_run"]) == (False, None)
    assert row["next_run"].endswith(("T00:00:00Z", "T01:00:00Z"))  # 02:00 Berlin
    table = dagq("schedule", "list").stdout.splitlines()  # piped: tab-separated, no header
    assert table[0].split("\t")[:3] == ["nightly", "0 0 2 * * *", "Europe/Berlin"]

    info = as_json(dagq("schedule", "show", "nightly", "--json"))
    assert len(info["next_fire_times"]) == 5 and info["runs"] == [] and info["missed"] == []
    assert info["definition"]["tasks"][1]["depends_on"] == ["extract"]
    shown = dagq("schedule", "show", "nightly").stdout
    assert "next fire times:" in shown and "Europe/Berlin" in shown

    times = as_json(dagq("schedule", "next", "nightly", "-n", "3", "--json"))
    assert times == info["next_fire_times"][:3]
    lines = dagq("schedule", "next", "nightly", "-n", "2").stdout.splitlines()
    assert len(lines) == 2 and all(" 02:00:00 CE" in line for line in lines)

    assert "paused" in dagq("schedule", "pause", "nightly").stderr
    [row] = as_json(dagq("schedule", "list", "--json"))
    assert row["paused"] is True and row["next_run"] is None
    assert "yes" in dagq("schedule", "list").stdout.splitlines()[0].split("\t")
    dagq("schedule", "resume", "nightly")
    assert as_json(dagq("schedule", "list", "--json"))[0]["paused"] is False
    assert "removed" in dagq("schedule", "remove", "nightly").stderr
    assert as_json(dagq("schedule", "list", "--json")) == []


@pytest.mark.parametrize(("args", "words"), [
    (["--cron", "61 * * * *"], ["minute field '61' is out of range 0-59"]),
    (["--cron", "0 0 * * *", "--timezone", "europe/berlin"], ["did you mean 'Europe/Berlin'"]),
    (["--cron", "1 2 3"], ["expected 6 fields"]),
], ids=["cron-range", "zone", "fields"])
def test_add_rejects_bad_input_and_writes_nothing(dagq: Run, flow: str, args: list[str],
                                                  words: list[str]) -> None:
    done = dagq("schedule", "add", "job", flow, *args, ok=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    for word in words:
        assert word in done.stderr
    assert as_json(dagq("schedule", "list", "--json")) == []


def test_usage_and_lookup_errors(dagq: Run, flow: str, tmp_path: Path) -> None:
    bad_param = dagq("schedule", "add", "job", flow, "--cron", "@daily", "--param", "novalue",
                     ok=False)
    assert bad_param.returncode == 2 and "KEY=VALUE" in bad_param.stderr  # a usage error
    bad_file = tmp_path / "bad.yaml"
    bad_file.write_text("name: x\ntasks: []\n")
    assert dagq("schedule", "add", "job", str(bad_file), "--cron", "@daily",
                ok=False).returncode == 1
    dagq("schedule", "add", "job", flow, "--cron", "@daily")
    taken = dagq("schedule", "add", "job", flow, "--cron", "@hourly", ok=False)
    assert taken.returncode == 1 and "already exists" in taken.stderr
    for command in (["show", "ghost"], ["pause", "ghost"], ["remove", "ghost"],
                    ["next", "ghost"]):
        done = dagq("schedule", *command, ok=False)
        assert done.returncode == 5 and "no schedule named 'ghost'" in done.stderr, command


def _wait_for(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.1)


def test_scheduler_once_fires_a_due_schedule(dagq: Run, flow: str) -> None:
    dagq("schedule", "add", "tick", flow, "--cron", "* * * * * *")
    outputs: list[str] = []

    def fired() -> bool:
        done = dagq("scheduler", "--once")
        outputs.append(done.stdout)
        return "submitted sched-tick-" in done.stdout

    _wait_for(fired)
    assert "1 tick(s)" in dagq("scheduler", "--once").stderr
    [row] = as_json(dagq("schedule", "list", "--json"))
    assert row["last_run"]["run_id"].startswith("sched-tick-")
    assert row["last_run"]["status"] == "pending"  # no coordinator runs in this test
    runs = [w for w in as_json(dagq("list", "--json")) if w["id"].startswith("sched-tick-")]
    assert runs and all(w["extra"]["schedule"] == "tick" for w in runs)


def test_scheduler_stops_cleanly_on_sigterm(dagq: Run, flow: str, env: dict[str, str],
                                            tmp_path: Path) -> None:
    dagq("schedule", "add", "tick", flow, "--cron", "* * * * * *", "--overlap", "allow")
    proc = subprocess.Popen([DAGQ, "scheduler", "--interval", "0.2"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: bool(as_json(dagq("schedule", "list", "--json"))[0]["last_run"]))
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    [summary] = [line for line in err.splitlines() if line.startswith("scheduler stopped:")]
    assert "run(s) submitted" in summary and "0 error(s)" in summary
    assert "submitted sched-tick-" in out


def test_trigger_backfill_and_update_from_the_cli(dagq: Run, flow: str) -> None:
    dagq("schedule", "add", "daily", flow, "--cron", "0 6 * * *", "--overlap", "buffer_one",
         "--catchup-window", "300", "--history", "20", "--param", "region={schedule.date}")
    run = dagq("schedule", "trigger", "daily").stdout.strip()
    assert run.startswith("sched-daily-")
    assert dagq("status", run, "--json").returncode == 0
    filled = dagq("schedule", "backfill", "daily", "--from", "2026-01-01",
                  "--to", "2026-01-03T23:00:00Z")
    assert filled.stdout.split() == [f"sched-daily-2026010{d}T060000Z" for d in (1, 2, 3)]
    assert "3 new run(s)" in filled.stderr
    again = dagq("schedule", "backfill", "daily", "--from", "2026-01-01", "--to",
                 "2026-01-03T23:00:00Z", "--json")
    assert [r["created"] for r in as_json(again)] == [False, False, False]
    bad = dagq("schedule", "backfill", "daily", "--from", "soon", "--to", "later", ok=False)
    assert bad.returncode == 2 and "ISO 8601" in bad.stderr
    dagq("schedule", "update", "daily", "--cron", "0 7 * * *", "--param", "size=2")
    info = as_json(dagq("schedule", "show", "daily", "--json"))
    assert (info["cron"], info["overlap"], info["catchup_window_s"], info["history"]) == (
        "0 7 * * *", "buffer_one", 300, 20)
    assert info["params"] == {"region": "{schedule.date}", "size": 2}
    assert len(info["runs"]) == 4  # the trigger and the three backfilled days
    bad = dagq("schedule", "update", "daily", "--cron", "61 * * * *", ok=False)
    assert bad.returncode == 1


def test_a_schedule_named_by_its_factory(dagq: Run, flow: str, env: dict[str, str]) -> None:
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    dagq("schedule", "add", "fact", "--factory", "tests.schedules.factories:nightly",
         "--cron", "0 1 * * *", "--param", "day={schedule.date}", "--param", "shards=1")
    info = as_json(dagq("schedule", "show", "fact", "--json"))
    assert info["params"] == {"day": "{schedule.date}", "shards": 1}
    assert info["workflow"].startswith("nightly-")
    for args in ((flow, "--factory", "tests.schedules.factories:nightly"), ()):
        bad = dagq("schedule", "add", "x", *args, "--cron", "@daily", ok=False)
        assert bad.returncode == 2 and "FILE or as --factory" in bad.stderr  # usage
    bad = dagq("schedule", "add", "y", "--factory", "nope.mod:fn", "--cron", "@daily", ok=False)
    assert bad.returncode == 1 and "cannot import 'nope.mod:fn'" in bad.stderr

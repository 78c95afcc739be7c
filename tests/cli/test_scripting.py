"""What scripts rely on (issue 31, point 8): `--json` on output, wait and logs; tasks in
`status --json`; validate problems as the HTTP API's objects; tab-separated lines without
headers when piped; times as ISO-8601 UTC strings."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.kit import dagq, define, is_iso_utc, store_env

ONE = ("name: one\ntasks:\n  - name: a\n"
       "    kwargs: {cmd: 'printf ''{\"v\": 2}'' > $DAGQ_OUTPUT_FILE'}\n")


def _ran(tmp_path: Path) -> dict[str, str]:
    env = store_env(tmp_path)
    out = dagq(env, "run", str(define(tmp_path, "one.yaml", ONE)), "--id", "one-1")
    assert out.returncode == 0, out.stderr
    return env


def test_json_of_output_wait_and_status_with_iso_times(tmp_path: Path) -> None:
    env = _ran(tmp_path)
    got = json.loads(dagq(env, "output", "one-1", "a", "--json").stdout)
    assert got == {"workflow": "one-1", "task": "a", "status": "completed", "attempt": 1,
                   "output": {"v": 2}}
    out = dagq(env, "wait", "one-1", "--json")
    assert out.returncode == 0
    [summary] = json.loads(out.stdout)
    assert summary["id"] == "one-1" and summary["status"] == "completed"
    assert is_iso_utc(summary["created_at"]) and is_iso_utc(summary["updated_at"])
    status = json.loads(dagq(env, "status", "one-1", "--json").stdout)
    [task] = status["tasks"]
    assert task["name"] == "a" and task["status"] == "completed" and status["tasks_total"] == 1
    assert is_iso_utc(task["dispatched_at"]) and is_iso_utc(task["finished_at"])
    assert all(is_iso_utc(a["started_at"]) for a in task["attempts"] if a.get("started_at"))
    [row] = json.loads(dagq(env, "list", "--json").stdout)
    assert is_iso_utc(row["created_at"])


def test_validate_json_problems_are_objects(tmp_path: Path) -> None:
    bad = define(tmp_path, "bad.yaml",
                 "name: bad\ntasks:\n  - name: a\n    depends_on: [nowhere]\n"
                 "    kwargs: {cmd: 'true'}\n")
    out = dagq(store_env(tmp_path), "validate", str(bad), "--json")
    assert out.returncode == 1
    [report] = json.loads(out.stdout)
    [problem] = report["problems"]
    assert problem["task"] == "a" and "nowhere" in problem["message"]
    assert problem["line"] == 4


def test_piped_status_doctor_and_schedule_list_are_tab_separated(tmp_path: Path) -> None:
    env = _ran(tmp_path)
    lines = [ln.split("\t") for ln in dagq(env, "status", "one-1").stdout.splitlines()]
    assert lines[0][:4] == ["workflow", "one-1", "one", "completed"]
    assert lines[1][:3] == ["task", "a", "completed"] and is_iso_utc(lines[1][5])
    assert all(len(ln) > 1 for ln in lines)  # no header, no blank or aligned text
    doctor = dagq(env, "doctor")
    assert doctor.returncode == 0 and "live workers" not in doctor.stdout
    assert all(ln.split("\t")[0] in ("worker", "problem") for ln in doctor.stdout.splitlines())
    assert dagq(env, "schedule", "add", "nightly", "--cron", "0 3 * * *",
                str(tmp_path / "one.yaml")).returncode == 0
    [sched] = [ln.split("\t") for ln in dagq(env, "schedule", "list").stdout.splitlines()]
    assert sched[:3] == ["nightly", "0 3 * * *", "UTC"]

"""A wait that cannot end says why on stderr after a few seconds, and goes on waiting
(issue 31, point 1): `wait`, `watch`, `submit --wait` name the queue no worker serves, or
the missing coordinator."""

from __future__ import annotations

from pathlib import Path

from tests.cli.kit import dagq, define, store_env, submit_dispatched

NOBODY = "name: stuck\ntasks:\n  - name: render\n    queue: nobody\n    kwargs: {cmd: 'true'}\n"


def test_wait_and_watch_name_the_queue_no_worker_serves(tmp_path: Path) -> None:
    env = store_env(tmp_path, DAGQ_HINT_AFTER="0.5")
    submit_dispatched(env, define(tmp_path, "wf.yaml", NOBODY), "stuck-1")
    for args in (["wait", "stuck-1"], ["watch", "stuck-1"]):
        out = dagq(env, *args, "--timeout", "3", "--interval", "0.2")
        assert out.returncode == 4, out  # the hint does not end the wait: the timeout does
        assert "no worker serves queue 'nobody'" in out.stderr, out.stderr
        assert "render" in out.stderr and "dagq worker nobody" in out.stderr
        assert out.stderr.count("no worker serves queue") == 1  # said once, not per poll


def test_submit_wait_says_no_coordinator_started_the_workflow(tmp_path: Path) -> None:
    env = store_env(tmp_path, DAGQ_HINT_AFTER="0.5")
    path = define(tmp_path, "wf.yaml", NOBODY)
    out = dagq(env, "submit", str(path), "--wait", "--timeout", "3")
    assert out.returncode == 4, out
    assert "no coordinator has started this workflow" in out.stderr, out.stderr
    assert "dagq coordinator" in out.stderr


def test_no_hint_before_the_delay(tmp_path: Path) -> None:
    env = store_env(tmp_path, DAGQ_HINT_AFTER="60")
    submit_dispatched(env, define(tmp_path, "wf.yaml", NOBODY), "stuck-1")
    out = dagq(env, "wait", "stuck-1", "--timeout", "1")
    assert out.returncode == 4 and "no worker serves" not in out.stderr


def test_hints_come_from_explain_reasons() -> None:
    from dagq.cli.hints import hints_of

    rows: list[dict[str, object]] = [
        {"task": "a", "phase": "queued", "reasons": [
            "attempt 1 is queued on 'gpu' since 9s ago; no worker has reported it started",
            "queue 'gpu' has no live worker (start one: dagq worker gpu)"]},
        {"task": "b", "phase": "started", "reasons": ["attempt 1 is running on a worker"]},
    ]
    assert list(hints_of(rows)) == ["queue:gpu"]
    assert "no worker serves queue 'gpu': 1 task(s) queued there (a)" in hints_of(rows)[
        "queue:gpu"]

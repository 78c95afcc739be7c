"""A mapped task through the CLI: ``dagq tasks``, ``status``, ``explain`` and ``graph``
show it folded with counts (its instances on demand), and ``dagq retry`` runs again only
the instance that failed."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.kit import dagq, define, store_env

FLAKY = r"""
name: flaky-map
tasks:
  - name: scan
    kwargs: {cmd: 'echo "{\"files\": [\"a\", \"b\", \"c\"]}" > $DAGQ_OUTPUT_FILE'}
  - name: fit
    depends_on: [scan]
    map: {over: inputs.scan.files}
    kwargs: {cmd: 'if [ {item} = b ] && [ ! -e MARKER ]; then touch MARKER; exit 1; fi'}
  - name: reduce
    depends_on: [fit]
    kwargs: {cmd: 'true'}
"""


def test_a_failed_instance_is_shown_folded_and_retry_runs_it_alone(tmp_path: Path) -> None:
    env = store_env(tmp_path)
    path = define(tmp_path, "flaky.yaml", FLAKY.replace("MARKER", str(tmp_path / "marker")))
    first = dagq(env, "run", str(path), "--id", "fm-1", cwd=tmp_path)
    assert first.returncode == 1, first.stderr

    rows = json.loads(dagq(env, "tasks", "fm-1", "--json").stdout)
    assert [r["name"] for r in rows] == ["scan", "fit", "reduce"]
    assert rows[1]["status"] == "failed"
    assert rows[1]["map"]["counts"] == {"completed": 2, "failed": 1}
    instances = json.loads(dagq(env, "tasks", "fm-1", "--prefix", "fit[", "--json").stdout)
    assert {r["name"]: r["status"] for r in instances} == {
        "fit[0]": "completed", "fit[1]": "failed", "fit[2]": "completed"}

    one = dagq(env, "explain", "fm-1", "fit[1]")
    assert one.returncode == 0, one.stderr
    assert "instance 1 of map 'fit' (item: b)" in one.stdout and "attempt 1 failed" in one.stdout
    head = dagq(env, "explain", "fm-1", "fit").stdout
    assert "mapped over 3 items of inputs.scan.files" in head
    assert "failed instances: fit[1]" in head
    picture = dagq(env, "graph", "fm-1").stdout
    assert "fit ×3 (2 ✓ 1 ✗)" in picture and "fit[" not in picture
    status = dagq(env, "status", "fm-1").stdout.splitlines()
    assert status[0].split("\t")[4] == "completed=3 failed=1 upstream_failed=1"
    assert [line.split("\t")[1:3] for line in status[1:]] == [
        ["scan", "completed"], ["fit", "failed"], ["reduce", "upstream_failed"]]

    assert dagq(env, "retry", "fm-1").returncode == 0
    second = dagq(env, "run", str(path), "--id", "fm-1", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    rows = json.loads(dagq(env, "tasks", "fm-1", "--prefix", "fit[", "--json").stdout)
    assert {r["name"]: (r["status"], r["attempt"]) for r in rows} == {
        "fit[0]": ("completed", 1), "fit[1]": ("completed", 2), "fit[2]": ("completed", 1)}
    assert {r["name"]: len(r["attempts"]) for r in rows} == {"fit[0]": 1, "fit[1]": 2,
                                                            "fit[2]": 1}

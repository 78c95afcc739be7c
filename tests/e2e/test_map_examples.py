"""examples/map/ end to end on the embedded store: scan -> fit (mapped) -> reduce
completes, the flaky variant fails with one failed instance that ``dagq retry`` runs
again alone, and the Python-composed version is current and runs.

Task rows are read from the stored state (``TaskView``s), not from ``dagq tasks``,
whose presentation of a map (folded, expanded on demand) is not what is tested here."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from dagq.backends import open_backend
from dagq.core.engine import TaskView, loads
from examples.map.pipeline import build as build_example
from tests.e2e.harness import REPO, Dagq

pytestmark = pytest.mark.slow
EXAMPLE = REPO / "examples" / "map"
FITS = [f"fit[{k}]" for k in range(6)]
SIX_SHARDS = [f"data/part-{k:03d}.csv" for k in range(6)]


def views(dagq: Dagq, wf: str) -> dict[str, TaskView]:
    """Every task of ``wf`` (the mapped task's instances included) from its stored state."""
    backend = open_backend(dagq.store)
    try:
        state = loads(backend.states.read(wf)[0])
    finally:
        backend.close()
    return {v.name: v for v in state.iter_task_views()}


def test_the_map_example_completes_from_any_directory(dagq: Dagq) -> None:
    res = dagq.run("run", str(EXAMPLE / "pipeline.yaml"), "--id", "map-1", "--json")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    # the expanded fit counts as its six instances: scan, reduce and fit[0..5]
    assert (summary["status"], summary["counts"]) == ("completed", {"completed": 8})
    rows = views(dagq, "map-1")
    assert list(rows) == ["scan", "fit", "reduce", *FITS]
    assert {v.status for v in rows.values()} == {"completed"}
    assert (rows["fit"].note or "").startswith("mapped over 6 items")
    # {item.path} and {item.size} reached each instance, in item order
    assert [dagq.output("map-1", f)["path"] for f in FITS] == SIX_SHARDS
    assert [dagq.output("map-1", f)["rows"] for f in FITS] == [200 + 50 * k for k in range(6)]
    reduce = dagq.output("map-1", "reduce")
    assert reduce["shards"] == 6 and reduce["rows"] == sum(200 + 50 * k for k in range(6))
    assert reduce["mean_loss"] < 1


def test_the_flaky_instance_fails_alone_and_retry_runs_only_it(dagq: Dagq) -> None:
    tmp = {"TMPDIR": str(dagq.root)}  # the marker of the first failure lands here
    marker = dagq.root / "dagq-map-flaky-flaky-1"
    flaky = str(EXAMPLE / "flaky.yaml")
    first = dagq.run("run", flaky, "--id", "flaky-1", env=tmp)
    assert first.returncode == 1, first.stderr
    rows = views(dagq, "flaky-1")
    assert {n: v.status for n, v in rows.items() if v.status != "completed"} == {
        "fit[3]": "failed", "reduce": "upstream_failed"}
    assert "data/part-003.csv is not readable yet" in (rows["fit[3]"].error or "")
    assert {f: rows[f].attempt for f in FITS} == dict.fromkeys(FITS, 1)
    assert marker.exists()
    before = {f: rows[f].finished_at for f in FITS if f != "fit[3]"}

    assert dagq.run("retry", "flaky-1").returncode == 0
    second = dagq.run("run", flaky, "--id", "flaky-1", env=tmp)
    assert second.returncode == 0, second.stderr
    rows = views(dagq, "flaky-1")
    assert {v.status for v in rows.values()} == {"completed"}
    # only fit[3] ran again (attempt 2); the other instances kept attempt 1 and its end
    assert {f: rows[f].attempt for f in FITS} == {f: 2 if f == "fit[3]" else 1 for f in FITS}
    assert {f: rows[f].finished_at for f in before} == before
    history = dagq.json("tasks", "flaky-1", "--prefix", "fit[3]")
    assert [a["attempt"] for a in history[0]["attempts"]] == [1, 2]
    assert dagq.output("flaky-1", "reduce")["shards"] == 6
    assert not marker.exists()  # reduce removed it


def test_the_python_map_example_is_current_and_runs(dagq: Dagq) -> None:
    checked_in = EXAMPLE / "python.yaml"
    assert checked_in.read_text() == build_example().to_yaml(), (
        "regenerate it: python -m examples.map.pipeline > examples/map/python.yaml")
    printed = subprocess.run([sys.executable, "-m", "examples.map.pipeline"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout
    assert printed == checked_in.read_text()
    # run from the repository: the worker's working directory is on the functions' path
    res = dagq.run("run", str(checked_in), "--id", "map-py", cwd=REPO)
    assert res.returncode == 0, res.stderr
    assert [dagq.output("map-py", f)["path"] for f in FITS] == SIX_SHARDS
    assert dagq.output("map-py", "reduce") == expected_reduce()


def expected_reduce() -> dict[str, Any]:
    """What reduce returns for scan's six shards, computed here in process."""
    from examples.map.steps import fit, reduce, scan

    return reduce({"fit": [fit(s) for s in scan(6)["shards"]]})

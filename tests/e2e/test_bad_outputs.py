"""Task outputs no part of dagq could carry fail their attempt once, with the rule, while
the coordinator and worker stay up and an unrelated workflow finishes (real processes)."""

from __future__ import annotations

import sys

import pytest

from tests.e2e.harness import SCRIPTS, Dagq, executions, pid_alive

SCRIPT = SCRIPTS / "bad_output.py"
RULES = {
    "deep": "nested more than 64 levels",
    "surrogate": "lone surrogate U+D800",
    "nan": "NaN is not allowed",
    "bigint": "more than 4300 digits",
    "latin1": "not valid UTF-8",
}


def run_bad_outputs(d: Dagq) -> None:
    """The scenario, on whatever store ``d`` drives (also used on Azurite)."""
    log = d.root / "runs.log"
    tasks = [{"name": kind, "num_retries": 2,
              "kwargs": {"cmd": f"{sys.executable} {SCRIPT} {kind} {log}"}}
             for kind in [*RULES, "grows"]]
    bad = d.submit(d.define("bad", tasks))
    fine = d.submit(d.define("fine", [
        {"name": "t", "kwargs": {"cmd": f"{sys.executable} {SCRIPT} fine {log}"}}]))
    coord = d.coordinator()
    worker = d.worker(concurrency=3)
    finals = d.wait_all_terminal([bad, fine], deadline_s=180)
    assert finals[fine]["status"] == "completed", d.diagnostics(fine)
    assert finals[bad]["status"] == "failed", d.diagnostics(bad)
    got = d.tasks(bad)
    for kind, rule in RULES.items():
        assert got[kind]["status"] == "failed", got[kind]
        assert rule in got[kind]["error"], got[kind]
    assert got["grows"]["status"] == "completed", got["grows"]
    assert d.output(bad, "grows") == [100000.0] * 7000
    runs = executions(log)
    assert sorted(runs) == sorted(set(runs)), "an attempt ran twice"
    # a refused output is a task failure: retries apply, one run per attempt
    assert sorted(a for w, t, a in runs if t == "deep") == [1, 2, 3]
    assert pid_alive(coord.popen.pid) and pid_alive(worker.popen.pid)


@pytest.mark.slow
def test_unusable_outputs_fail_once_and_harm_nobody_else(dagq: Dagq) -> None:
    run_bad_outputs(dagq)

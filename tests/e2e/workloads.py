"""The workflow the crash tests run: a fan-out, a fan-in, conditions and a retry.

    root -> fan-1..fan-4 ----------> join -> when-true  -> sink
         -> flaky (fails attempt 1) /      -> when-false /

Every task appends ``workflow task attempt`` to a log, so a test can count executions.
Only ``join`` starts Python (to sum its inputs); the others are plain shell, which keeps
the crash tests light on a small machine.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.harness import Dagq, executions, sh_step, step

FANS = 4

EXPECTED_STATUSES = {
    "root": "completed", **{f"fan-{i}": "completed" for i in range(1, FANS + 1)},
    "flaky": "completed", "join": "completed", "when-true": "completed",
    "when-false": "skipped", "sink": "completed",
}
EXPECTED_RUNS = sorted(
    [("root", 1), *((f"fan-{i}", 1) for i in range(1, FANS + 1)), ("flaky", 1), ("flaky", 2),
     ("join", 1), ("when-true", 1), ("sink", 1)])
"""Every ``(task, attempt)`` that must run (once each, unless a crash window allows more)."""
JOIN_TOTAL = sum(range(1, FANS + 1)) + 50


def define_mix(d: Dagq, log: Path, name: str = "mix") -> Path:
    """Write the workflow; its tasks log to ``log``."""
    fans = [f"fan-{i}" for i in range(1, FANS + 1)]
    return d.define(name, [
        {"name": "root", "kwargs": {"cmd": sh_step(log, v=0)}},
        *({"name": fan, "depends_on": ["root"],
           "kwargs": {"cmd": sh_step(log, v=i)}} for i, fan in enumerate(fans, 1)),
        {"name": "flaky", "depends_on": ["root"], "num_retries": 2, "retry_backoff_s": 0.1,
         "kwargs": {"cmd": sh_step(log, v=50, fail_until=2)}},
        {"name": "join", "depends_on": [*fans, "flaky"],
         "kwargs": {"cmd": step("--log", log, "--sum-upstream")}},
        {"name": "when-true", "depends_on": ["join"],
         "condition": f"inputs.join.total == {JOIN_TOTAL}",
         "kwargs": {"cmd": sh_step(log)}},
        {"name": "when-false", "depends_on": ["join"], "condition": "inputs.join.total > 1000",
         "kwargs": {"cmd": sh_step(log)}},
        {"name": "sink", "depends_on": ["when-true", "when-false"],
         "kwargs": {"cmd": sh_step(log)}},
    ])


def check_mix(d: Dagq, ids: list[str], deadline_s: float = 90.0) -> None:
    """Wait for the workflows ``ids`` to end and check their statuses and attempts.

    Outputs are checked too: ``when-true`` runs only if ``join`` saw every fan output and
    the retried ``flaky`` output (its condition compares the sum), and ``when-false``
    is skipped only if the condition was evaluated.
    """
    rows = d.wait_all_terminal(ids, deadline_s)
    for wf in ids:
        assert rows[wf]["status"] == "completed", d.diagnostics(wf)
        assert rows[wf]["counts"] == {"completed": len(EXPECTED_STATUSES) - 1, "skipped": 1}
        tasks = d.tasks(wf)
        assert {n: t["status"] for n, t in tasks.items()} == EXPECTED_STATUSES
        assert {n: t["attempt"] for n, t in tasks.items() if n != "when-false"} == {
            n: 2 if n == "flaky" else 1 for n in EXPECTED_STATUSES if n != "when-false"}


def runs_of(log: Path, wf: str) -> Counter[tuple[str, int]]:
    """How often each ``(task, attempt)`` of ``wf`` ran."""
    return Counter((task, attempt) for w, task, attempt in executions(log) if w == wf)


def check_runs(log: Path, wf: str, duplicates_allowed: bool) -> int:
    """Check that every expected attempt ran, nothing else did, and duplicates only if
    allowed; returns the number of duplicate executions."""
    runs = runs_of(log, wf)
    assert sorted(runs) == EXPECTED_RUNS, runs
    dups = sum(n - 1 for n in runs.values())
    if not duplicates_allowed:
        assert dups == 0, f"duplicate executions outside a crash window: {runs}"
    return dups


def condition_tasks(score: Callable[[int], str], run: str) -> list[dict[str, Any]]:
    """Two scores (7 and 3, made by ``score(v)``) and four conditional tasks running
    ``run``: ``if-true`` and ``agg-true`` run, ``if-false`` and ``agg-false`` are skipped.
    Shared by the embedded and the Azurite end-to-end tests."""
    return [
        {"name": "score-a", "kwargs": {"cmd": score(7)}},
        {"name": "score-b", "kwargs": {"cmd": score(3)}},
        {"name": "if-true", "depends_on": ["score-a"],
         "condition": 'inputs["score-a"].v > 5', "kwargs": {"cmd": run}},
        {"name": "if-false", "depends_on": ["score-a"],
         "condition": 'inputs["score-a"].v > 50', "kwargs": {"cmd": run}},
        {"name": "agg-true", "depends_on": ["score-a", "score-b"],
         "condition": 'count(inputs.*.v > 2) == 2 and any(inputs["score-*"].v == 3)',
         "kwargs": {"cmd": run}},
        {"name": "agg-false", "depends_on": ["score-a", "score-b"],
         "condition": 'all(inputs["score-*"].v > 5)', "kwargs": {"cmd": run}},
    ]


CASCADE_TASKS: list[dict[str, Any]] = [
    {"name": "fine", "kwargs": {"cmd": "true"}},
    {"name": "broken", "kwargs": {"cmd": "echo 'disk on fire' >&2; exit 3"}},
    {"name": "child", "depends_on": ["broken"], "kwargs": {"cmd": "true"}},
    {"name": "grandchild", "depends_on": ["child", "fine"], "kwargs": {"cmd": "true"}},
]
"""A failure cascading: ``broken`` fails, ``child`` and ``grandchild`` become upstream_failed."""

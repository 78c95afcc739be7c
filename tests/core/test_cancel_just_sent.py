"""A cancel right after a dispatch asks the attempt to stop: only a start delay makes an
attempt "not started yet", even when the stored dispatch time (rounded to the
millisecond) reads a little later than the cancel's ``now``."""

from __future__ import annotations

from dagq.core import engine
from dagq.core.model import TaskDef, WorkflowDef

WF = WorkflowDef("w", (TaskDef("a", {"cmd": "true"}),
                       TaskDef("b", {"cmd": "true"}, delay_s=30.0)))


def test_an_attempt_sent_without_delay_is_stopped_not_cancelled_unstarted() -> None:
    t0 = 1_000.0
    state = engine.create(WF, "w1", t0)
    engine.start(state, t0 + 0.0005004)  # stored as +1 ms: later than the cancel below
    state = engine.loads(engine.dumps(state))
    fx = engine.cancel(state, t0 + 0.0006)
    assert engine.stopping_keys(state) == ["w1/a/1"]
    assert [name for name, _ in fx.stop] == ["a"]
    assert state.task_view("a").status == "running"
    # the delayed attempt had not started: it is cancelled at once
    assert state.task_view("b").status == "cancelled"
    assert state.status == "running"

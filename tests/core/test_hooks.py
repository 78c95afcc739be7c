"""Workflow hooks in the pure core: validation of ``on_finish``/``on_failure``, which
statuses fire them, and the ``notify`` outbox entry the engine records (only for a
definition with hooks, once per terminal status, kept across encodings)."""

from __future__ import annotations

import pytest

from dagq.core import engine
from dagq.core.hooks import fired, url_problem
from dagq.core.model import TaskDef, WorkflowDef
from dagq.core.parse import definition_from_dict, definition_to_dict
from dagq.errors import DefinitionError


def problems(**fields: object) -> list[str]:
    data = {"name": "x", "tasks": [{"name": "a", "kwargs": {"cmd": "true"}}], **fields}
    try:
        definition_from_dict(data)
    except DefinitionError as exc:
        return [f"{p.field}: {p.message}" for p in exc.problems]
    return []


@pytest.mark.parametrize("url", ["https://hooks.example.com/dagq?x=1",
                                 "http://localhost:8080/h", "http://127.0.0.1/h"])
def test_good_urls(url: str) -> None:
    assert url_problem(url) is None


@pytest.mark.parametrize(("url", "why"), [
    ("http://hooks.example.com/h", "https://"),
    ("https://user:pw@hooks.example.com/h", "credentials"),
    ("ftp://x/y", "https://"),
    ("", "non-empty"),
])
def test_bad_urls(url: str, why: str) -> None:
    problem = url_problem(url)
    assert problem is not None and why in problem


def test_every_problem_of_the_hook_fields_is_reported_with_its_path() -> None:
    found = problems(on_finish={"webhook": {"url": "http://x.com", "secret": "v"},
                                "event": "yes", "mail": 1},
                     on_failure={"task": {"name": "workflow", "kwargs": {"cmd": "x"}}})
    assert any(f.startswith("on_finish.webhook.url:") for f in found)
    assert any(f.startswith("on_finish.webhook.secret:") for f in found)
    assert any(f.startswith("on_finish.event:") for f in found)
    assert any(f.startswith("on_finish.mail:") for f in found)
    assert any(f.startswith("on_failure.task.name:") and "reserved" in f for f in found)
    assert problems(on_failure={"webhook": {"url": "https://h.example/x",
                                            "secret_env": "HOOK_SECRET"},
                                "event": True,
                                "task": {"name": "page", "kwargs": {"cmd": "x"}}}) == []
    assert any("secret_env" in f for f in problems(
        on_finish={"webhook": {"url": "https://h.example/x", "secret_env": "not a name"}}))


def test_hooks_survive_the_canonical_form() -> None:
    hooks = {"on_failure": {"event": True, "task": {"name": "page", "kwargs": {"cmd": "x"}}}}
    data = {"name": "x", "tasks": [{"name": "a", "kwargs": {"cmd": "true"}}], **hooks}
    defn = definition_from_dict(data)
    assert definition_to_dict(defn)["on_failure"] == hooks["on_failure"]


def test_which_statuses_fire_which_hooks() -> None:
    d = WorkflowDef("x", (TaskDef("a"),), on_finish={"event": True},
                    on_failure={"event": True})
    assert [f for f, _ in fired(d, "failed")] == ["on_finish", "on_failure"]
    assert [f for f, _ in fired(d, "completed")] == ["on_finish"]
    assert [f for f, _ in fired(d, "cancelled")] == ["on_finish"]
    only = WorkflowDef("x", (TaskDef("a"),), on_failure={"event": True})
    assert fired(only, "completed") == []


def _fail(state: engine.WorkflowState, now: float, attempt: int = 1) -> engine.Effects:
    return engine.apply(state, [engine.Completion("a", attempt, False, error="error: boom")],
                        now)


def test_the_engine_records_one_notify_entry_per_terminal_status() -> None:
    d = WorkflowDef("x", (TaskDef("a", {"cmd": "false"}),), on_failure={"event": True})
    s = engine.create(d, "wf", 100.0)
    engine.start(s, 100.0)
    _fail(s, 101.0)
    notify = [e for e in s.outbox.values() if e.kind == "notify"]
    assert len(notify) == 1
    event = notify[0].payload
    assert isinstance(event, engine.NotifyEvent)
    assert (event.key, event.status, event.number) == ("wf/event-1", "failed", 1)
    assert event.counts == {"failed": 1}
    assert event.failed == (("a", 1, "error: boom"),) and event.failed_total == 1
    again = engine.loads(engine.dumps(s))  # the entry and the counter are stored
    assert again.outbox["wf/event-1"] == notify[0] and again.events_sent == 1
    engine.clear_outbox(s, list(s.outbox))
    engine.retry(s, 102.0, "r1")  # a retried run that fails again is a second event
    _fail(s, 103.0, attempt=2)
    assert [k for k, e in s.outbox.items() if e.kind == "notify"] == ["wf/event-2"]


def test_no_hooks_no_entry_and_a_non_firing_status_no_entry() -> None:
    for d in (WorkflowDef("x", (TaskDef("a", {"cmd": "true"}),)),
              WorkflowDef("x", (TaskDef("a", {"cmd": "true"}),), on_failure={"event": True})):
        s = engine.create(d, "wf", 100.0)
        engine.start(s, 100.0)
        engine.apply(s, [engine.Completion("a", 1, True)], 101.0)
        assert s.status == "completed"
        assert not [e for e in s.outbox.values() if e.kind == "notify"]
        assert s.events_sent == 0

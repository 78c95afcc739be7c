"""WorkflowState read access and the dumps/loads round trip."""

from __future__ import annotations

import zlib

import pytest

from dagq.core import engine
from dagq.core.engine import Completion, WorkflowState, dumps, loads
from dagq.core.engine.codec import FORMAT_VERSION
from dagq.core.engine.defcodec import def_from_json, def_to_json
from dagq.core.model import OutputRef, SubWorkflow, TaskDef, WorkflowDef
from dagq.errors import DefinitionError

REF = OutputRef("outputs/wf/b/1.json", "d41d8cd98f00b204e9800998ecf8427e", 12)
CHILD = WorkflowDef("child", (TaskDef("x", kwargs={"cmd": "true"}),), params={"p": 1})
RICH = WorkflowDef(
    "rich",
    (
        TaskDef("a", kwargs={"cmd": "echo a", "env": {"K": "v"}}, queue="gpu", num_retries=2,
                retry_backoff_s=1.5, retry_backoff_max_s=9, timeout_s=30),
        TaskDef("b", depends_on=("a",), condition="inputs.a.ok == true", delay_s=2),
        TaskDef("c", depends_on=("a",)),
        TaskDef("d", depends_on=("b", "c"), dep_policy="any"),
        TaskDef("e", depends_on=("b", "c", "d"), dep_policy=2),
        TaskDef("__merge_f_0", depends_on=("e",), merge=True),
        TaskDef("sub", workflow=SubWorkflow(definition=CHILD, path="c.yaml", params={"r": "eu"})),
        TaskDef("f", depends_on=("__merge_f_0",)),
        TaskDef("g"), TaskDef("h"),
    ),
    default_queue="cpu", default_task_timeout_s=600, max_parallelism=4,
    result_policy="all_tasks_succeed", params={"run": 7}, description="all fields",
)


def mid_run(cancel: bool = False) -> WorkflowState:
    """A state with something in every column: outputs, refs, errors, notes, retries,
    releases, held tasks, stopped tasks, outbox entries of every kind, a parent link."""
    s = engine.create(RICH, "wf-1", 1000.0, parent=engine.ParentLink("up", "t", 3))
    engine.start(s, 1000.25)  # a, sub, g, h run (cap 4)
    engine.apply(s, [Completion("a", 1, False, error="flaky")], 1001.5)
    engine.apply(s, [Completion("a", 2, True, output={"ok": True, "n": [1, 2]}),
                     Completion("sub", 1, False, released=True)], 1002.125)
    engine.apply(s, [Completion("g", 1, False, error="bad")], 1003.0)  # c takes g's slot
    engine.apply(s, [Completion("c", 1, True, output_ref=REF)], 1003.5)  # d takes c's slot
    engine.retry(s, 1004.0, "req-1")  # g waits for a slot
    if cancel:
        engine.cancel(s, 1005.0)
    return s


def snapshot(s: WorkflowState) -> object:
    return (
        s.workflow_id, s.definition, s.status, s.created_at, s.updated_at, s.parent,
        dict(s.outbox), s.counts(), list(s.iter_task_views()), s.running(),
        {v.name: s.inputs_of(v.name) for v in s.iter_task_views()}, s.is_terminal(),
        [s.deadline(i) for i in range(len(s.st))], list(s.held), bytes(s.stopping),
        s.round_start, s.releases, s.retry_ids, s.cancel_requested,
    )


def test_read_access() -> None:
    s = mid_run()
    assert s.counts() == {k: v for k, v in s.counts().items() if v}
    assert sum(s.counts().values()) == len(RICH.tasks)
    a = s.task_view("a")
    assert (a.status, a.attempt, a.queue, a.output, a.dispatched_at) == (
        "completed", 2, "gpu", {"ok": True, "n": [1, 2]}, 1001.5)
    assert s.task_view("c").output_ref == REF
    assert s.inputs_of("d") == {"c": REF}
    assert s.inputs_of("b") == {"a": {"ok": True, "n": [1, 2]}}
    assert s.task_view("g").error is None and s.task_view("g").status == "ready"
    assert s.running() == [("b", 1), ("d", 1), ("sub", 1), ("h", 1)]
    assert s.outbox["wf-1/sub/1.1"].kind == "child"
    with pytest.raises(KeyError):
        s.task_view("nope")
    assert [v.name for v in s.iter_task_views()] == [t.name for t in RICH.tasks]


@pytest.mark.parametrize("cancel", [False, True])
def test_round_trip_mid_run_preserves_everything(cancel: bool) -> None:
    s = mid_run(cancel)
    assert any(s.stopping) == cancel and bool(s.held) != cancel
    data = dumps(s)
    assert data[:4] == b"DQST" and int.from_bytes(data[4:6], "big") == FORMAT_VERSION
    back = loads(data)
    assert snapshot(back) == snapshot(s)
    assert dumps(back) == data
    # the loaded state goes on exactly like the original
    for state in (s, back):
        for now in (1010.0, 1020.0, 1030.0, 1040.0):
            engine.apply(state, [Completion(t, a, True, output=t) for t, a in state.running()],
                         now)
        engine.expire(state, 5000.0)
    assert snapshot(back) == snapshot(s)
    assert back.status == s.status == ("cancelled" if cancel else "completed")


def test_every_running_state_round_trips_in_a_small_run() -> None:
    defn = WorkflowDef("w", (TaskDef("a", num_retries=1), TaskDef("b", depends_on=("a",)),
                             TaskDef("c", depends_on=("a", "b"), dep_policy="any")),
                       max_parallelism=1)
    s = engine.create(defn, "w", 0.0)
    steps = [lambda: engine.start(s, 1.0),
             lambda: engine.apply(s, [Completion("a", 1, False)], 2.0),
             lambda: engine.apply(s, [Completion("a", 2, True, output=1)], 3.0),
             lambda: engine.apply(s, [Completion("b", 1, True)], 4.0),
             lambda: engine.apply(s, [Completion("c", 1, True)], 5.0)]
    for step in steps:
        step()
        assert snapshot(loads(dumps(s))) == snapshot(s)
    assert s.status == "completed"


def test_times_are_kept_to_the_millisecond() -> None:
    s = engine.create(WorkflowDef("w", (TaskDef("a"),)), "w", 100.0)
    engine.start(s, 100.0004)
    assert loads(dumps(s)).task_view("a").dispatched_at == pytest.approx(100.0, abs=1e-9)


def test_definition_codec_round_trips_every_field() -> None:
    assert def_from_json(def_to_json(RICH)) == RICH
    minimal = WorkflowDef("m", (TaskDef("only"),))
    assert def_from_json(def_to_json(minimal)) == minimal
    assert "fields" not in def_to_json(minimal)


@pytest.mark.parametrize(("data", "match"), [
    (b"", "missing header"),
    (b"PK\x03\x04" + b"\x00" * 20, "missing header"),
    (b"DQST\x00\x03" + b"\x00" * 10, "version 3 is newer"),
    (b"DQST\x00\x01\x00\x00\x00\x02xx" + zlib.compress(b"{}"), "corrupt"),
])
def test_loads_rejects_foreign_newer_or_corrupt_data(data: bytes, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        loads(data)


def test_truncated_runtime_part_is_reported_as_corrupt() -> None:
    data = dumps(mid_run())
    with pytest.raises(ValueError, match="corrupt"):
        loads(data[:-20])


def test_create_rejects_definitions_the_engine_cannot_run() -> None:
    bad = WorkflowDef("bad", (TaskDef("a", depends_on=("c",)), TaskDef("b", depends_on=("a",)),
                              TaskDef("c", depends_on=("b",)), TaskDef("a"),
                              TaskDef("z", depends_on=("zz", "z"))))
    with pytest.raises(DefinitionError) as err:
        engine.create(bad, "w", 0.0)
    text = str(err.value)
    assert "duplicate task name" in text and "unknown task 'zz'" in text
    assert "depends on itself" in text
    cyc = WorkflowDef("cyc", (TaskDef("a", depends_on=("c",)), TaskDef("b", depends_on=("a",)),
                              TaskDef("c", depends_on=("b",)), TaskDef("d", depends_on=("a",))))
    with pytest.raises(DefinitionError, match=r"dependency cycle: (\w) -> (\w) -> (\w) -> \1"):
        engine.create(cyc, "w", 0.0)


def test_outbox_due_and_clear() -> None:
    s = engine.create(WorkflowDef("w", (TaskDef("a"), TaskDef("b", depends_on=("a",)))), "w",
                      0.0)
    engine.start(s, 10.0)
    engine.apply(s, [Completion("a", 1, True)], 25.0)
    assert [e.key for e in engine.outbox_due(s, 40.0, 30.0)] == ["w/a/1"]
    assert [e.key for e in engine.outbox_due(s, 55.0, 30.0)] == ["w/a/1", "w/b/1"]
    engine.clear_outbox(s, ["w/a/1", "unknown"])
    assert list(s.outbox) == ["w/b/1"]


@pytest.mark.parametrize("deps", [[[5], []], [[0], []], [[-1], []]])
def test_a_decoded_definition_whose_dependency_ids_point_nowhere_is_refused(
        deps: list[list[int]]) -> None:
    data = def_to_json(WorkflowDef("w", (TaskDef("a", {"cmd": "true"}),
                                         TaskDef("b", {"cmd": "true"}))))
    data["deps"] = deps  # task a: a missing task, itself, a negative index
    with pytest.raises(DefinitionError, match="damaged state"):
        engine.graph.Graph(def_from_json(data, lazy=True))


def test_a_decoded_definition_builds_the_graph_the_definition_builds() -> None:
    lazy = def_from_json(def_to_json(RICH), lazy=True)
    built, decoded = engine.graph.Graph(RICH), engine.graph.Graph(lazy)
    for slot in engine.graph.Graph.__slots__:
        if slot != "tasks":
            assert getattr(decoded, slot) == getattr(built, slot), slot

"""Task messages too large to carry their inputs spill them to an object named by the one
object-name builder, so any task name gives a valid, task-private blob name."""

from __future__ import annotations

from pathlib import Path

from dagq.backends.sqlite import SqliteBackend
from dagq.core import engine, paths
from dagq.core.limits import blob_name_problem
from dagq.core.model import OutputRef, TaskDef, WorkflowDef
from dagq.protocol.messages import MAX_TASK_MESSAGE_BYTES, decode_task
from dagq.runtime.dispatch import OutboxSender


def test_large_inputs_spill_under_the_task_own_encoded_name(tmp_path: Path) -> None:
    backend = SqliteBackend(tmp_path / "x.db")
    big = "v" * MAX_TASK_MESSAGE_BYTES
    defn = WorkflowDef("spill", (
        TaskDef("up", {"cmd": "true"}),
        TaskDef("a/../b.", {"cmd": "true"}, depends_on=("up",)),
    ))
    state = engine.create(defn, "wf-1", 0.0)
    engine.start(state, 0.0)
    effects = engine.apply(state, [engine.Completion("up", 1, True, output={"big": big})], 1.0)
    (dispatch,) = effects.dispatched
    message = decode_task(OutboxSender(backend, children=None).task_message(  # type: ignore[arg-type]
        state, dispatch))
    assert message.inputs == {}
    assert isinstance(message.inputs_ref, OutputRef)
    assert message.inputs_ref.name == paths.input_spill_name("wf-1", "a/../b.", 1)
    assert message.inputs_ref.name == "inputs/wf-1/a%2F..%2Fb%2E/1.json"
    assert blob_name_problem(message.inputs_ref.name) is None
    assert big.encode() in backend.outputs.get(message.inputs_ref.name)
    backend.close()

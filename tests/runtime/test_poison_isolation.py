"""A completion that cannot be applied or written harms only its own workflow: the rest
of the coordinator's batch is applied and acknowledged."""

from __future__ import annotations

from typing import Any

import pytest

from dagq.client import WorkflowClient
from dagq.config import Settings
from dagq.core.parse import load_definition
from dagq.ops.deadletters import fail_attempt, stalled
from dagq.ports import Backend
from dagq.protocol import names
from dagq.protocol.messages import CompletionMessage
from dagq.runtime import states as states_module
from dagq.runtime.coordinator import Coordinator

ONE = "name: one\ntasks:\n  - {name: t, kwargs: {cmd: 'true'}}\n"


def _started(backend: Backend, *ids: str) -> tuple[WorkflowClient, Coordinator]:
    client = WorkflowClient(backend)
    for wf in ids:
        client.submit(load_definition(ONE), workflow_id=wf)
    coord = Coordinator(backend, Settings(), children=client)
    while any(client.row(wf).status != "running" for wf in ids):
        coord.step()
    return client, coord


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def _complete(backend: Backend, wf: str, output: Any) -> None:
    body = CompletionMessage(wf, "t", 1, success=True, output=output).encode()
    backend.queues.get(names.COMPLETIONS).send(
        body, message_id=names.done_id(f"{wf}/t/1"), session_id=names.session_id(wf))


def _batch(coord: Coordinator, backend: Backend) -> None:
    while backend.queues.get(names.COMPLETIONS).approximate_count():
        coord.step()


def test_a_deep_output_fails_its_task_and_the_rest_of_the_batch_is_applied(
        backend: Backend) -> None:
    client, coord = _started(backend, "deep", "fine")
    _complete(backend, "deep", {"v": _deep(900)})
    _complete(backend, "fine", {"ok": True})
    _batch(coord, backend)
    assert client.row("fine").status == "completed"
    assert client.output("fine", "t") == {"ok": True}
    assert client.row("deep").status == "failed"
    [task] = client.tasks("deep")
    assert task["status"] == "failed"
    assert "refused this attempt's result" in task["error"]
    assert "nested more than 64 levels" in task["error"]


@pytest.mark.parametrize("raw", [b'{"v":"\\ud800"}', b'{"x":NaN}', b"[Infinity]",
                                 b"1" * 5000, b"[" * 5000 + b"]" * 5000],
                         ids=["surrogate", "nan", "infinity", "bigint", "undecodable-depth"])
def test_other_unusable_outputs_fail_their_task_once(backend: Backend, raw: bytes) -> None:
    client, coord = _started(backend, "bad", "fine")
    body = CompletionMessage("bad", "t", 1, success=True).encode()
    # written past the encoder, as a buggy or hostile sender could
    raw_body = body.replace(b'"output":null', b'"output":' + raw)
    backend.queues.get(names.COMPLETIONS).send(
        raw_body, message_id=names.done_id("bad/t/1"), session_id="bad")
    _complete(backend, "fine", 1)
    _batch(coord, backend)
    assert client.row("fine").status == "completed"
    assert client.row("bad").status == "failed"
    [task] = client.tasks("bad")
    assert "refused this attempt's result" in task["error"]
    assert stalled(backend) == []  # a dead-lettered body no longer stalls its workflow


def test_doctor_names_what_a_dead_letter_stalls_and_fail_releases_it(backend: Backend) -> None:
    client, coord = _started(backend, "stuck")
    [(msg, _)] = [(m, 0) for m in backend.queues.get("default").receive(1, 30)]
    backend.queues.get("default").dead_letter(msg, "injected: no worker could decode it")
    [item] = stalled(backend)
    assert (item.workflow_id, item.task, item.attempt, item.queue) == ("stuck", "t", 1,
                                                                       "default")
    fail_attempt(backend, item)
    _batch(coord, backend)
    assert client.row("stuck").status == "failed"
    assert stalled(backend) == []


def test_a_state_that_cannot_be_written_fails_only_its_workflow(
        backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    client, coord = _started(backend, "cursed", "fine")
    real = states_module.encode_write

    def encode_write(state: Any, max_entries: int, **kw: Any) -> tuple[str, bytes]:
        if state.workflow_id == "cursed":  # injected fault: this one state never encodes
            raise RecursionError("maximum recursion depth exceeded")
        return real(state, max_entries, **kw)

    monkeypatch.setattr(states_module, "encode_write", encode_write)
    _complete(backend, "cursed", 1)
    _complete(backend, "fine", 2)
    _batch(coord, backend)  # returns: every message was acknowledged
    assert client.row("fine").status == "completed"
    assert client.row("cursed").status == "failed"

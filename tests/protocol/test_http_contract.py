"""The HTTP wire contract: one error table read by both ends, one endpoint table."""

from __future__ import annotations

import itertools

import pytest

from dagq.errors import DefinitionError, Problem, WorkflowFinished
from dagq.functions.errors import to_api_error
from dagq.protocol.http import (
    BY_CODE,
    ENDPOINTS,
    ERRORS,
    ErrorKind,
    kind_of,
    raised_error,
    wire_error,
)

RAISED = [kind for kind in ERRORS if kind.error is not None]


def test_codes_are_unique_and_no_class_shadows_another() -> None:
    assert len(BY_CODE) == len(ERRORS)
    for a, b in itertools.permutations(RAISED, 2):
        assert a.error is not None and b.error is not None
        assert not issubclass(a.error, b.error), (a.code, b.code)


@pytest.mark.parametrize("kind", RAISED, ids=lambda k: k.code)
def test_every_raised_kind_travels_there_and_back(kind: ErrorKind) -> None:
    body = {"error": f"what went wrong ({kind.code})", "code": kind.code, "details": [],
            "id": "wf", "status": "completed"}
    exc = raised_error(body)
    assert exc is not None and type(exc) is kind.error
    assert kind_of(exc) is kind
    back = wire_error(exc)
    assert back is not None and back.kind is kind
    server = to_api_error(exc)
    assert (server.status, server.code) == (kind.status, kind.code)
    if kind.error is not DefinitionError:
        assert back.message == body["error"] and str(exc) == body["error"]


def test_definition_problems_and_finished_fields_survive_the_trip() -> None:
    problems = [Problem("no such task", task="b", field="depends_on", line=3, column=5)]
    exc = raised_error(wire_error(DefinitionError(problems))
                       .body())  # type: ignore[union-attr]
    assert isinstance(exc, DefinitionError) and exc.problems == problems
    done = raised_error(wire_error(WorkflowFinished("ended", "w1", "failed"))
                        .body())  # type: ignore[union-attr]
    assert isinstance(done, WorkflowFinished)
    assert (done.workflow_id, done.status) == ("w1", "failed")


def test_codes_of_the_http_layer_raise_nothing_particular() -> None:
    for kind in ERRORS:
        if kind.error is None:
            assert raised_error({"error": "x", "code": kind.code}) is None
    assert raised_error({"error": "x", "code": "a-code-from-a-newer-server"}) is None


def test_endpoints_are_distinct_and_build_encoded_paths() -> None:
    names = [e.name for e in ENDPOINTS]
    assert len(set(names)) == len(names)
    routes = [(e.method, e.route) for e in ENDPOINTS]
    assert len(set(routes)) == len(routes)
    task = next(e for e in ENDPOINTS if e.route == "workflows/{id}/tasks/{task}")
    assert task.path(id="a b", task="x/y") == "/workflows/a%20b/tasks/x%2Fy"

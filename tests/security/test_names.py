"""Names that a URL path would rewrite (``.``, ``..``) cannot name a task, and workflow
names cannot carry characters a terminal acts on; a client asked for such a task gets a
plain "not found", never a traceback or another route's answer."""

from __future__ import annotations

import json

import pytest

from dagq.core.parse import load_definition
from dagq.core.validate import validate
from dagq.errors import DefinitionError
from dagq.protocol.http import segment as _seg
from tests.e2e.api import serve
from tests.e2e.harness import Dagq


def problems(text: str) -> list[str]:
    try:
        return [p.message for p in validate(load_definition(text, source="t.yaml"))]
    except DefinitionError as exc:
        return [p.message for p in exc.problems]


@pytest.mark.parametrize("name", [".", "..", "a/..", "../b", "a/./b", "x/."])
def test_dot_segment_task_names_are_refused(name: str) -> None:
    found = problems(f"name: w\ntasks:\n  - name: {json.dumps(name)}\n"
                     "    kwargs: {cmd: 'true'}\n")
    assert len(found) == 1 and "'.' or '..'" in found[0], found


@pytest.mark.parametrize("name", ["...", "a..b", "v1.2", "data/load", ".hidden", "a/...b"])
def test_other_dotted_names_stay_valid(name: str) -> None:
    assert problems(f"name: w\ntasks:\n  - name: {json.dumps(name)}\n"
                    "    kwargs: {cmd: 'true'}\n") == []


@pytest.mark.parametrize("char", ["\x1b", "\x07", "\x00", "\x9b", "\u202e", "\n"])
def test_workflow_names_refuse_control_characters(char: str) -> None:
    found = problems(f"name: {json.dumps('nightly' + char + '[31mred')}\n"
                     "tasks:\n  - name: a\n    kwargs: {cmd: 'true'}\n")
    assert any("control character" in m for m in found), found


def test_dot_segments_survive_the_clients_url() -> None:
    assert _seg("..") == "%2E%2E" and _seg(".") == "%2E" and _seg("a/b") == "a%2Fb"


def test_asking_for_dot_tasks_over_http_is_not_found(dagq: Dagq) -> None:
    served = serve(dagq)
    wf = dagq.submit(dagq.define("w", [{"name": "a", "kwargs": {"cmd": "true"}}]))
    for args in (("task", wf, ".."), ("task", wf, "."), ("output", wf, "."),
                 ("output", wf, ".."), ("logs", wf, "..")):
        res = dagq.run("--api", served.url, *args)
        assert res.returncode == 5, (args, res.stdout, res.stderr)  # not found
        assert "Traceback" not in res.stderr and "KeyError" not in res.stderr
        assert "no task" in res.stderr.lower() or "not found" in res.stderr.lower(), res.stderr

"""Definitions that once made the HTTP API answer 500 (or crash while rendering its 400)
are 4xx with the rule, and nothing is written."""

from __future__ import annotations

import pytest

from dagq.ports import Backend
from tests.functions.host import Handler, assert_nothing_written, http

GOOD = b"name: g\ntasks:\n  - {name: t, kwargs: {cmd: 'true'}}\n"


@pytest.mark.parametrize(("body", "content_type", "status", "rule"), [
    (b'{"name":"a","tasks":[{"name":"t\\ud800","kwargs":{"cmd":"true"}}]}',
     "application/json", 400, "lone surrogate U+D800"),
    (b'{"name":"a","tasks":[{"name":"t","kwargs":{"cmd":"x","n":' + b"9" * 5000 + b"}}]}",
     "application/json", 400, "more than 4300 digits"),
    (b'{"name":"a","tasks":[{"name":"t","timeout_s":1e400,"kwargs":{"cmd":"true"}}]}',
     "application/json", 400, "timeout_s"),
    (b'{"name":"a","tasks":[{"name":"t","kwargs":{"cmd":"true","\\u0007":1}}]}',
     "application/json", 400, "control character U+0007"),
    (b'{"name":"a","tasks":[{"name":"t","kwargs":{"cmd":"a\\u0000b"}}]}',
     "application/json", 400, "NUL byte"),
    (GOOD, None, 415, "Content-Type"),
], ids=["surrogate", "bigint", "inf", "control-key", "nul", "no-content-type"])
def test_bad_definition_is_4xx_naming_the_rule(fns: dict[str, Handler], backend: Backend,
                                               body: bytes, content_type: str | None,
                                               status: int, rule: str) -> None:
    got, answer = http(fns["submit_workflow"], "POST", "workflows", body=body,
                       content_type=content_type)
    assert got == status, answer
    assert rule in answer["error"] + str(answer.get("details")), answer
    assert_nothing_written(backend)

"""``POST /workflows?params=``: an object that names a key twice, or a value with a NUL
byte, is a 400 and writes nothing."""

from __future__ import annotations

import json

import pytest

from dagq.ports import Backend
from tests.functions.host import Handler, assert_nothing_written, http

FLOW = b"""\
name: train
parameters:
  label: {type: string}
  opts: {type: object, default: {}}
tasks:
  - {name: fit, kwargs: {cmd: "train --label {params.label}"}}
"""


@pytest.mark.parametrize(("params", "message"), [
    ('{"label": "a", "label": "$(touch pwned)"}', "gives the key 'label' more than once"),
    ('{"label": "a", "opts": {"k": 1, "k": 2}}', "gives the key 'k' more than once"),
    ('{"label": "a\\u0000b"}', "parameter 'label' contains a NUL byte"),
])
def test_ambiguous_or_unusable_params_are_400(fns: dict[str, Handler], backend: Backend,
                                              params: str, message: str) -> None:
    status, body = http(fns["submit_workflow"], "POST", "workflows", body=FLOW,
                        params={"params": params})
    assert status == 400, body
    assert message in json.dumps(body), body
    assert_nothing_written(backend)

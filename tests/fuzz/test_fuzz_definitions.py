"""Generated definitions through validate, submit and the HTTP API: each is either
accepted or refused with problems (exit 1 / 4xx), never a traceback or a 5xx, and a
refused one writes nothing (bounded: a fixed number of examples, no deadline)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagq.client import WorkflowClient
from dagq.core.parse import load_definition
from dagq.errors import DagqError, DefinitionError
from dagq.functions.http_api import http_blueprint
from dagq.functions.runtime import Runtime
from tests.functions.host import app_of, assert_nothing_written, http, user_functions

BIG = "__big_integer__"
"""Placeholder written out as a 5000-digit integer (hypothesis cannot print one)."""
# every code point, lone surrogates and control characters included
TEXT = st.text(st.characters(blacklist_categories=()), max_size=12)
NAMES = st.one_of(st.sampled_from(["a", "b", "t-1", "x y"]), TEXT)
NUMBERS = st.one_of(
    st.integers(-5, 10), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([BIG, 1e300, 1e-300, 2 ** 63]))
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)), max_leaves=8)
KWARGS = st.fixed_dictionaries({}, optional={
    "cmd": st.one_of(TEXT, st.lists(TEXT, max_size=3), VALUES),
    "env": st.one_of(st.dictionaries(TEXT, st.one_of(TEXT, NUMBERS), max_size=3), VALUES),
    "cwd": st.one_of(TEXT, VALUES), "call": TEXT, "extra": VALUES})
TASK = st.fixed_dictionaries({"name": NAMES}, optional={
    "kwargs": st.one_of(KWARGS, VALUES), "depends_on": st.lists(NAMES, max_size=2),
    "timeout_s": NUMBERS, "delay_s": NUMBERS, "retry_backoff_s": NUMBERS,
    "retry_backoff_max_s": NUMBERS, "num_retries": NUMBERS, "queue": NAMES,
    "condition": TEXT, "dep_policy": TEXT, "odd": st.dictionaries(TEXT, VALUES, max_size=2)})
DEFINITION = st.fixed_dictionaries({"name": NAMES, "tasks": st.lists(TASK, max_size=3)},
                                   optional={"params": VALUES, "description": VALUES})


def _as_json(data: Any) -> bytes:
    """What a hostile client could send: lone surrogates as escapes, NaN, huge integers,
    unknown fields (a task's ``odd`` mapping is merged into the task)."""
    for task in data["tasks"]:
        task.update(task.pop("odd", {}))
    return json.dumps(data, ensure_ascii=True).replace(f'"{BIG}"', "7" * 5000).encode()


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    rt = Runtime({"DAGQ_STORE": f"sqlite:{tmp_path_factory.mktemp('fuzz') / 'x.db'}"})
    yield rt
    rt.close()


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=DEFINITION)
def test_generated_definitions_are_accepted_or_refused_cleanly(runtime: Runtime,
                                                               data: Any) -> None:
    body = _as_json(data)
    backend = runtime.backend()
    fns = user_functions(app_of(http_blueprint(runtime, "storage_queue")))
    before = sum(1 for _ in backend.index.query())
    try:
        defn = load_definition(body, source="fuzz.json", fmt="json")
    except DefinitionError as exc:
        str(exc).encode("utf-8")  # printable: a CLI can show it
        status, answer = http(fns["submit_workflow"], "POST", "workflows", body=body,
                              content_type="application/json")
        assert 400 <= status < 500, answer
        assert sum(1 for _ in backend.index.query()) == before
        return
    try:
        WorkflowClient(backend).submit(defn)
    except DagqError as exc:  # e.g. an unknown child file: refused, but cleanly
        str(exc).encode("utf-8")
    status, answer = http(fns["submit_workflow"], "POST", "workflows", body=body,
                          content_type="application/json")
    assert status < 500, answer


def test_the_fuzz_store_starts_empty(tmp_path: Path) -> None:
    rt = Runtime({"DAGQ_STORE": f"sqlite:{tmp_path / 'x.db'}"})
    try:
        assert_nothing_written(rt.backend())
    finally:
        rt.close()

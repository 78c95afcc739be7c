"""The shipped JSON Schema: valid, in step with the parser, accepts the examples."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from dagq.core.model import TaskDef, WorkflowDef
from dagq.core.parse import (
    TASK_FIELDS,
    WORKFLOW_FIELDS,
    definition_to_dict,
    load_definition,
)
from dagq.core.schema import load_schema, schema_path
from dagq.core.transforms import sequentialize_fan_in
from dagq.errors import DefinitionError

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = jsonschema.Draft202012Validator(load_schema())


def schema_ok(data: Any) -> bool:
    return bool(VALIDATOR.is_valid(data))


def parser_ok(text: str) -> bool:
    try:
        load_definition(text)
    except DefinitionError:
        return False
    return True


def example_files() -> list[Path]:
    found = [p for p in sorted((ROOT / "examples").rglob("*"))
             if p.suffix in (".yaml", ".yml", ".json")]
    return [p for p in found if isinstance(data := yaml.safe_load(p.read_text()), dict)
            and "tasks" in data]


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    schema = load_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    assert json.loads(schema_path().read_text()) == schema
    schema["title"] = "changed"
    assert load_schema()["title"] != "changed"


def test_schema_fields_match_the_parser() -> None:
    schema = load_schema()
    assert set(schema["properties"]) == set(WORKFLOW_FIELDS)
    assert set(schema["$defs"]["task"]["properties"]) == set(TASK_FIELDS)


def test_every_field_is_described_and_defaults_match_the_model() -> None:
    schema = load_schema()
    for props, model in ((schema["properties"], WorkflowDef),
                         (schema["$defs"]["task"]["properties"], TaskDef)):
        defaults = {f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING
                    else f.default for f in dataclasses.fields(model)}
        for name, prop in props.items():
            assert prop.get("description"), name
            if "default" in prop and name in defaults:
                expected = defaults[name]
                expected = list(expected) if isinstance(expected, tuple) else expected
                assert prop["default"] == expected, name


def test_every_valid_example_passes_the_schema() -> None:
    files = example_files()
    assert any(p.parent.name == "schema-demo" for p in files)
    for path in files:
        text = path.read_text()
        if parser_ok(text):  # the schema cannot see cycles or unknown dependencies
            assert schema_ok(yaml.safe_load(text)), path


def test_schema_demo_files_are_valid() -> None:
    for path in (ROOT / "examples" / "schema-demo").iterdir():
        assert schema_ok(yaml.safe_load(path.read_text())), path
        assert parser_ok(path.read_text()), path


VALID = [
    "name: x\ntasks: [{name: a}]\n",
    "name: x\ntasks: [{name: a}, {name: b, depends_on: a, dep_policy: 1, condition: inputs.a.ok}]",
    "name: x\ntasks: [{name: prep/a, queue: null, timeout_s: null}]\n",
    "name: x\ntasks: [{name: a, workflow: child.yaml, params: {k: 1}}]\n",
    "name: x\ntasks: [{name: a, workflow: {name: c, tasks: [{name: b}]}}]\n",
    '{"$schema": "s.json", "name": "x", "tasks": [{"name": "a", "kwargs": {"env": {"A": 1}}}]}',
]


@pytest.mark.parametrize("text", VALID)
def test_valid_fixtures_pass_both(text: str) -> None:
    assert schema_ok(yaml.safe_load(text))
    assert parser_ok(text)


def test_canonical_forms_validate() -> None:
    roots = tuple(TaskDef(f"r{i}") for i in range(5))
    defn = WorkflowDef("fan", (*roots, TaskDef("leaf", depends_on=tuple(r.name for r in roots))),
                       default_queue="cpu", max_parallelism=2, params={"a": [1]})
    assert schema_ok(definition_to_dict(defn))
    assert schema_ok(definition_to_dict(sequentialize_fan_in(defn, 2)))  # merge nodes


# Each of these is rejected by the schema and by the parser alike.
INVALID = [
    "name: x\ntasks: [{name: a}]\ncolour: red\n",
    "name: x\ntasks: [{name: a, colour: red}]\n",
    "name: x\ntasks: []\n",
    "tasks: [{name: a}]\n",
    "name: x\ntasks: [{kwargs: {}}]\n",
    "name: x\ndefault_queue: CPU\ntasks: [{name: a}]\n",
    "name: x\ntasks: [{name: a, queue: gpu--a}]\n",
    "name: x\ntasks: [{name: '__merge_a'}]\n",
    "name: x\ntasks: [{name: 'a#b'}]\n",
    "name: x\ntasks: [{name: ' a'}]\n",
    "name: x\ntasks: [{name: a}, {name: b, depends_on: [a], dep_policy: 0}]\n",
    "name: x\ntasks: [{name: a, dep_policy: some}]\n",
    "name: x\ntasks: [{name: a, num_retries: -1}]\n",
    "name: x\ntasks: [{name: a, num_retries: true}]\n",
    "name: x\ntasks: [{name: a, timeout_s: 0}]\n",
    "name: x\ntasks: [{name: a, delay_s: -1}]\n",
    "name: x\nmax_parallelism: 0\ntasks: [{name: a}]\n",
    "name: x\nresult_policy: most\ntasks: [{name: a}]\n",
    "name: x\ntasks: [{name: a, params: {k: 1}}]\n",
    "name: x\ntasks: [{name: a, workflow: c.yaml, kwargs: {cmd: run}}]\n",
    "name: x\ntasks: [{name: a, workflow: {name: c, tasks: [{name: b, oops: 1}]}}]\n",
    "name: x\ntasks: [{name: a, workflow: ''}]\n",
    "name: x\ntasks: [{name: __merge_a_0, merge: true, kwargs: {cmd: x}}]\n",
    "name: x\ntasks: [{name: a, kwargs: {cmd: ''}}]\n",
    "name: x\ntasks: [{name: a, kwargs: {env: [A]}}]\n",
    "name: x\ntasks: [{name: a, depends_on: [b, b]}, {name: b}]\n",
]


@pytest.mark.parametrize("text", INVALID)
def test_invalid_fixtures_fail_both(text: str) -> None:
    assert not schema_ok(yaml.safe_load(text))
    assert not parser_ok(text)

"""The shipped JSON Schema: valid, in step with the parser, accepts the examples."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from dagq.core.kinds import marked_kinds
from dagq.core.model import TaskDef, WorkflowDef
from dagq.core.parse import (
    TASK_FIELDS,
    WORKFLOW_FIELDS,
    definition_to_dict,
    load_definition,
)
from dagq.core.schema import load_schema, schema_path
from dagq.core.schema.generate import SCHEMA_ID, schema_text
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


def test_shipped_file_is_the_generated_schema() -> None:
    # regenerate with: dagq schema --write shared/dagq/core/schema/workflow-definition.schema.json
    assert schema_path().read_text() == schema_text()
    assert load_schema()["$id"] == SCHEMA_ID


def test_every_declared_key_of_every_kind_is_in_both() -> None:
    for kind in marked_kinds():
        assert set(load_schema()["$defs"]["kinds"][kind.name]["properties"]) == set(kind.keys)
        for key in kind.keys:
            # an unknown sibling of each declared key is refused by both
            bad = {kind.marker: "m:f" if kind.marker == "call" else "x", key + "zz": 1}
            text = json.dumps({"name": "x", "tasks": [{"name": "a", "kwargs": bad}]})
            assert not schema_ok(json.loads(text)) and not parser_ok(text), (kind.name, key)


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
    "name: x\ntasks: [{name: a, kind: noop}]\n",
    "name: x\ntasks: [{name: a, kind: noop}, {name: b, depends_on: a, dep_policy: 1, "
        "condition: inputs.a.ok, kind: noop}]",
    "name: x\ntasks: [{name: prep/a, queue: null, timeout_s: null, kind: noop}]\n",
    "name: x\ntasks: [{name: a, workflow: child.yaml, params: {k: 1}}]\n",
    "name: x\ntasks: [{name: a, workflow: {name: c, tasks: [{name: b, kind: noop}]}}]\n",
    '{"$schema": "s.json", "name": "x", "tasks": [{"name": "a", "kwargs": {"cmd": "x", '
        '"env": {"A": 1}}}]}',
    "name: x\ntasks: [{name: a, kwargs: {call: 'm:f', args: {n: 1}, x_note: hi}, "
        "kind: function}]\n",
]


@pytest.mark.parametrize("text", VALID)
def test_valid_fixtures_pass_both(text: str) -> None:
    assert schema_ok(yaml.safe_load(text))
    assert parser_ok(text)


def test_canonical_forms_validate() -> None:
    roots = tuple(TaskDef(f"r{i}", {"cmd": "true"}) for i in range(5))
    leaf = TaskDef("leaf", depends_on=tuple(r.name for r in roots), kind="noop")
    defn = WorkflowDef("fan", (*roots, leaf),
                       default_queue="cpu", max_parallelism=2, params={"a": [1]})
    assert schema_ok(definition_to_dict(defn))
    assert schema_ok(definition_to_dict(sequentialize_fan_in(defn, 2)))  # merge nodes


# Each of these is rejected by the schema and by the parser alike.
INVALID = [
    "name: x\ntasks: [{name: a, kind: noop}]\ncolour: red\n",
    "name: x\ntasks: [{name: a, colour: red, kind: noop}]\n",
    "name: x\ntasks: []\n",
    "tasks: [{name: a, kind: noop}]\n",
    "name: x\ntasks: [{kwargs: {}}]\n",
    "name: x\ndefault_queue: CPU\ntasks: [{name: a, kind: noop}]\n",
    "name: x\ntasks: [{name: a, queue: gpu--a, kind: noop}]\n",
    "name: x\ntasks: [{name: '__merge_a'}]\n",
    "name: x\ntasks: [{name: 'a#b', kind: noop}]\n",
    "name: x\ntasks: [{name: ' a', kind: noop}]\n",
    "name: x\ntasks: [{name: a, kind: noop}, {name: b, depends_on: [a], dep_policy: 0, "
        "kind: noop}]\n",
    "name: x\ntasks: [{name: a, dep_policy: some, kind: noop}]\n",
    "name: x\ntasks: [{name: a, num_retries: -1, kind: noop}]\n",
    "name: x\ntasks: [{name: a, num_retries: true, kind: noop}]\n",
    "name: x\ntasks: [{name: a, timeout_s: 0, kind: noop}]\n",
    "name: x\ntasks: [{name: a, delay_s: -1, kind: noop}]\n",
    "name: x\nmax_parallelism: 0\ntasks: [{name: a, kind: noop}]\n",
    "name: x\nresult_policy: most\ntasks: [{name: a, kind: noop}]\n",
    "name: x\ntasks: [{name: a, params: {k: 1}}]\n",
    "name: x\ntasks: [{name: a, workflow: c.yaml, kwargs: {cmd: run}}]\n",
    "name: x\ntasks: [{name: a, workflow: {name: c, tasks: [{name: b, oops: 1, kind: noop}]}}]\n",
    "name: x\ntasks: [{name: a, workflow: ''}]\n",
    "name: x\ntasks: [{name: __merge_a_0, merge: true, kwargs: {cmd: x}}]\n",
    "name: x\ntasks: [{name: a, kwargs: {cmd: ''}}]\n",
    "name: x\ntasks: [{name: a, kwargs: {env: [A]}}]\n",
    "name: x\ntasks: [{name: a, depends_on: [b, b], kind: noop}, {name: b, kind: noop}]\n",
    # task kinds
    "name: x\ntasks: [{name: a}]\n",
    "name: x\ntasks: [{name: a, kwargs: {command: run}}]\n",
    "name: x\ntasks: [{name: a, kwargs: {cmd: run, cwdd: /}}]\n",
    "name: x\ntasks: [{name: a, kwargs: {call: 'm:f', env: {}, cmdline: x}}]\n",
    "name: x\ntasks: [{name: a, kind: shell}]\n",
    "name: x\ntasks: [{name: a, kind: function, kwargs: {cmd: run}}]\n",
    "name: x\ntasks: [{name: a, kind: noop, kwargs: {cwd: /}}]\n",
    "name: x\ntasks: [{name: a, kind: workflow}]\n",
    "name: x\ntasks: [{name: a, kind: shel, kwargs: {cmd: run}}]\n",
    "name: x\ntasks: [{name: a, workflow: c.yaml, kwargs: {env: {}}}]\n",
    "name: x\ntasks: [{name: 'a*b', kind: noop}]\n",
]


@pytest.mark.parametrize("text", INVALID)
def test_invalid_fixtures_fail_both(text: str) -> None:
    assert not schema_ok(yaml.safe_load(text))
    assert not parser_ok(text)

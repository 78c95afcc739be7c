"""Parsing YAML/JSON definitions: structure, line numbers, canonical forms."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from dagq.core.kinds import TaskKind, registered_kind
from dagq.core.model import SubWorkflow, TaskDef, WorkflowDef
from dagq.core.parse import (
    canonical_json,
    definition_from_dict,
    definition_hash,
    definition_to_dict,
    dump_yaml,
    load_definition,
)
from dagq.core.transforms import sequentialize_fan_in
from dagq.errors import DefinitionError, Problem
from tests.fixtures.definitions import join

DIAMOND = textwrap.dedent("""\
    # yaml-language-server: $schema=workflow-definition.schema.json
    name: featurize-and-train
    default_queue: cpu-general
    tasks:
    - name: featurize
      kind: ml
      kwargs:
        input: abfs://data/raw.parquet
    - name: train-gnn
      kind: ml
      kwargs: {model: schnet}
      depends_on: [featurize]
      queue: gpu-a100
    - name: train-rf
      kind: ml
      kwargs: {model: random-forest}
      depends_on: featurize
      queue: cpu-64core
    - name: compare
      kind: ml
      kwargs: {metric: mae}
      depends_on: [train-gnn, train-rf]
    """)
ML_KIND = TaskKind("ml", "the ML processor of the reference example",
                   keys={"input": {"type": "string"}, "model": {"type": "string"},
                         "metric": {"type": "string"}})


def problems_of(text: str | bytes, **kwargs: Any) -> list[Problem]:
    with pytest.raises(DefinitionError) as info:
        load_definition(text, **kwargs)
    assert "Traceback" not in str(info.value)
    return info.value.problems


def where(problems: list[Problem]) -> list[tuple[int | None, str | None]]:
    return [(p.line, p.field) for p in problems]


def test_reference_diamond_loads_with_every_field_mapped() -> None:
    with registered_kind(ML_KIND):  # kwargs read by a custom processor, declared by it
        defn = load_definition(DIAMOND)
    assert defn.name == "featurize-and-train"
    assert defn.default_queue == "cpu-general"
    assert [t.name for t in defn.tasks] == ["featurize", "train-gnn", "train-rf", "compare"]
    train_rf = defn.task("train-rf")
    assert train_rf.depends_on == ("featurize",)  # a single string is accepted
    assert train_rf.kwargs == {"model": "random-forest"}
    assert defn.queue_of(train_rf) == "cpu-64core"
    assert defn.queue_of(defn.task("compare")) == "cpu-general"
    assert defn.task("compare").depends_on == ("train-gnn", "train-rf")


def test_json_is_detected_and_accepts_schema_key() -> None:
    text = json.dumps({"$schema": "x.json", "name": "j", "tasks": [{"name": "a", "kind": "noop"}]})
    assert load_definition(text) == WorkflowDef(name="j", tasks=(join(name="a"),))
    assert load_definition(text, fmt="json") == load_definition(text, fmt="yaml")


def test_bytes_with_byte_order_mark() -> None:
    defn = load_definition("\ufeffname: b\ntasks: [{name: a, kind: noop}]\n".encode())
    assert defn.name == "b"


def test_every_field_is_read() -> None:
    defn = load_definition(textwrap.dedent("""\
        name: all
        description: text
        default_queue: q1
        default_task_timeout_s: 30
        max_parallelism: 4
        result_policy: all_tasks_succeed
        params: {p: 1}
        tasks:
          - {name: a, kind: noop}
          - name: b
            kwargs: {cmd: run}
            depends_on: [a]
            queue: q2
            dep_policy: 1
            condition: inputs.a.ok
            num_retries: 2
            retry_backoff_s: 1.5
            retry_backoff_max_s: 10
            timeout_s: 5
            delay_s: 2
          - name: c
            workflow: child.yaml
            params: {x: 1}
        """))
    assert (defn.description, defn.default_task_timeout_s, defn.max_parallelism) == ("text", 30, 4)
    assert (defn.result_policy, defn.params) == ("all_tasks_succeed", {"p": 1})
    b = defn.task("b")
    assert (b.queue, b.dep_policy, b.condition, b.num_retries) == ("q2", 1, "inputs.a.ok", 2)
    assert (b.retry_backoff_s, b.retry_backoff_max_s, b.timeout_s, b.delay_s) == (1.5, 10, 5, 2)
    assert defn.task("c").workflow == SubWorkflow(path="child.yaml", params={"x": 1})


def test_null_means_default_only_where_the_default_is_unset() -> None:
    defn = load_definition("name: n\ntasks:\n- {name: a, queue: null, timeout_s: null, "
        "kind: noop}\n")
    assert defn.tasks[0].queue is None and defn.tasks[0].timeout_s is None
    problems = problems_of("name: n\ntasks:\n- name: a\n  kind: noop\n  num_retries:\n")
    assert where(problems) == [(5, "tasks[0].num_retries")]
    assert "got null" in problems[0].message


def test_malformed_yaml_gives_one_problem_with_position() -> None:
    problems = problems_of("name: x\ntasks: [a, b\nfoo: 1\n")
    assert len(problems) == 1
    assert (problems[0].line, problems[0].column) == (3, 4)
    assert problems[0].message.startswith("invalid YAML")


@pytest.mark.parametrize(("text", "line", "column"), [
    ("name: a: b\n", 1, 8),
    ("name: x\n---\nname: y\n", 2, 1),
    ("name: x\n\x01\n", 2, 1),
])
def test_other_yaml_errors_have_positions(text: str, line: int, column: int) -> None:
    [problem] = problems_of(text)
    assert (problem.line, problem.column) == (line, column)


def test_malformed_json_gives_line_and_column() -> None:
    [problem] = problems_of('{\n  "name": "x",\n  "tasks": [}\n', fmt="json")
    assert (problem.line, problem.column) == (3, 13)
    assert problem.message.startswith("invalid JSON")


def test_invalid_utf8() -> None:
    [problem] = problems_of(b"name: x\ntasks: \xff\n")
    assert (problem.line, problem.column) == (2, 8)
    assert "UTF-8" in problem.message


@pytest.mark.parametrize("text", ["", "# only a comment\n", "[1, 2]", "just text"])
def test_not_a_mapping(text: str) -> None:
    [problem] = problems_of(text)
    assert "needs at least 'name' and 'tasks'" in problem.message


def test_unknown_fields_suggest_the_right_name_with_line() -> None:
    problems = problems_of(textwrap.dedent("""\
        name: x
        default_queu: cpu
        tasks:
          - name: a
            depend_on: [b]
            zzzz: 1
            kind: noop
          - {name: b, kind: noop}
        """))
    assert where(problems) == [(2, "default_queu"), (5, "tasks[0].depend_on"),
                               (6, "tasks[0].zzzz")]
    assert "did you mean 'default_queue'?" in problems[0].message
    assert "did you mean 'depends_on'?" in problems[1].message
    assert "allowed fields: name, kwargs" in problems[2].message
    assert problems[1].task == "a"


def test_missing_names_are_reported_once() -> None:
    problems = problems_of("tasks:\n- kwargs: {cmd: x}\n- {name: b, kind: noop}\n")
    assert [p.message for p in problems] == ["missing required field 'name'",
                                             "every task needs a name"]
    assert where(problems) == [(1, "name"), (2, "tasks[0].name")]


@pytest.mark.parametrize(("text", "message"), [
    ("name: x\n", "missing required field 'tasks'"),
    ("name: x\ntasks: {a: 1}\n", "tasks must be a list of tasks, got a mapping"),
    ("name: x\ntasks: []\n", "a workflow needs at least one task"),
])
def test_task_list_problems(text: str, message: str) -> None:
    [problem] = problems_of(text)
    assert problem.message == message
    assert problem.line is not None


def test_duplicate_keys_yaml_and_json() -> None:
    problems = problems_of("name: x\ntasks:\n- name: a\n  kwargs: {cmd: a, cmd: b}\n")
    assert [(p.line, p.column) for p in problems] == [(4, 20)]
    assert "duplicate key 'cmd'" in problems[0].message
    problems = problems_of('{"name": "x",\n "tasks": [{"name": "a", '
        '"kind": "noop"}],\n "name": "y"}')
    assert [(p.line, p.column) for p in problems] == [(3, 2)]


def test_json_problems_get_lines_too() -> None:
    text = json.dumps({"name": "x", "tasks": [{"name": "a", "depends_on": ["nope"],
        "kind": "noop"}]},
                      indent=2)
    [problem] = problems_of(text)
    assert (problem.line, problem.field) == (7, "tasks[0].depends_on[0]")


def test_many_problems_reported_together_sorted_by_line() -> None:
    text = textwrap.dedent("""\
        name: several
        default_queue: CPU_General
        tasks:
        - name: a
          num_retries: true
          kind: noop
        - name: b
          depends_on: [c, zz]
          dep_policy: 3
          kind: noop
        - name: c
          depends_on: [b]
          condition: inputs.b.x <
          kind: noop
        - name: c
          timeout_s: 0
          kind: noop
        - just-a-string
        - name: d
          condition: inputs.b.ok
          dep_policy: "2"
          kind: noop
        """)
    problems = problems_of(text, source="several.yaml")
    assert where(problems) == [
        (2, "default_queue"),
        (5, "tasks[0].num_retries"),
        (8, "tasks[1].depends_on"),        # the cycle b -> c -> b
        (8, "tasks[1].depends_on[1]"),     # zz is unknown
        (9, "tasks[1].dep_policy"),
        (13, "tasks[2].condition"),
        (15, "tasks[3].name"),             # duplicate c
        (16, "tasks[3].timeout_s"),
        (18, "tasks[4]"),
        (20, "tasks[5].condition"),        # no dependencies
        (21, "tasks[5].dep_policy"),
    ]
    assert all(p.column is not None for p in problems)


def test_workflow_field_forms() -> None:
    defn = load_definition(textwrap.dedent("""\
        name: parent
        tasks:
          - name: inline
            workflow:
              name: child
              tasks: [{name: x, kind: noop}]
            params: {region: eu}
          - name: by-path
            workflow: etl.yaml
        """))
    inline = defn.task("inline").workflow
    assert inline == SubWorkflow(definition=WorkflowDef("child", (join("x"),)),
                                 params={"region": "eu"})
    assert defn.task("by-path").workflow == SubWorkflow(path="etl.yaml")


def test_inline_workflow_problems_are_prefixed_and_located() -> None:
    problems = problems_of(textwrap.dedent("""\
        name: parent
        tasks:
          - name: sub
            kwargs: {cmd: echo}
            workflow:
              name: child
              tasks:
                - name: x
                  depends_on: [y]
                  colour: red
                  kind: noop
          - name: other
            params: {a: 1}
            kind: noop
          - name: bad
            workflow: 5
        """))
    assert where(problems) == [
        (4, "tasks[0].kwargs"),
        (9, "tasks[0].workflow.tasks[0].depends_on[0]"),
        (10, "tasks[0].workflow.tasks[0].colour"),
        (13, "tasks[1].params"),
        (16, "tasks[2].workflow"),
    ]
    assert problems[0].message.startswith("a task with 'workflow' runs the child workflow")
    assert problems[1].task == "sub"
    assert problems[1].message == "task 'x' of the sub-workflow: depends on unknown task 'y'"
    assert problems[3].message.startswith("params are the parameters of a child workflow")


def test_non_json_values_in_kwargs() -> None:
    problems = problems_of(textwrap.dedent("""\
        name: x
        tasks:
          - name: a
            kwargs:
              x_when: 2024-01-01
              1: one
              x_nan: .nan
              cmd: run
        """))
    assert where(problems) == [(4, "tasks[0].kwargs"), (5, "tasks[0].kwargs.x_when"),
                               (7, "tasks[0].kwargs.x_nan")]
    messages = " | ".join(p.message for p in problems)
    assert "quote it" in messages and "keys must be strings" in messages
    assert "JSON has no NaN" in messages


def test_aliases_work_but_bombs_and_recursion_are_rejected() -> None:
    defn = load_definition(textwrap.dedent("""\
        name: x
        tasks:
          - {name: a, kwargs: &common {cmd: run, env: {A: "1"}}}
          - {name: b, kwargs: *common}
        """))
    assert defn.tasks[1].kwargs == {"cmd": "run", "env": {"A": "1"}}
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    bomb = ("name: x\nbomb:\n" + "\n".join("  " + line for line in levels)
            + "\ntasks: [{name: a, kind: noop}]")
    [problem] = problems_of(bomb)
    assert "expands to more than" in problem.message
    [problem] = problems_of("name: x\ntasks: [{name: a, kwargs: &k {self: *k}}]\n")
    assert "refers to itself" in problem.message


def test_deep_nesting_is_rejected_cleanly() -> None:
    deep = "[" * 100 + "]" * 100
    problems = problems_of(f"name: x\ntasks:\n- name: a\n  kwargs: {{cmd: x, x_deep: {deep}}}\n")
    assert problems[0].field is not None and problems[0].field.startswith("tasks[0].kwargs.x_deep")
    assert "nested more than 64 levels" in problems[0].message
    very_deep = "[" * 100_000 + "]" * 100_000
    assert problems_of(f"name: x\ntasks: {very_deep}\n")
    assert problems_of('{"name": "x", "tasks": ' + very_deep + "}")


def test_definition_from_dict_has_no_lines() -> None:
    with pytest.raises(DefinitionError) as info:
        definition_from_dict({"name": "x", "tasks": [{"name": "a", "depends_on": ["a"],
            "kind": "noop"}]},
                             source="api")
    [problem] = info.value.problems
    assert (problem.line, problem.field, problem.task) == (None, "tasks[0].depends_on[0]", "a")
    assert str(info.value).startswith("api: 1 problem(s)")


FULL: dict[str, Any] = {
    "name": "full",
    "description": "d",
    "default_queue": "q",
    "default_task_timeout_s": 30,
    "max_parallelism": 3,
    "result_policy": "all_tasks_succeed",
    "params": {"p": [1, {"q": None}]},
    "tasks": [
        {"name": "a", "kwargs": {"cmd": "x\ny\n", "env": {"K": "V"}}, "queue": "other",
         "num_retries": 2, "retry_backoff_s": 1.5, "retry_backoff_max_s": 20, "timeout_s": 9,
         "delay_s": 0.5},
        {"name": "b", "depends_on": ["a"], "dep_policy": "any", "condition": "inputs.a.ok",
            "kind": "noop"},
        {"name": "c", "depends_on": ["a", "b"], "dep_policy": 1,
         "workflow": {"name": "child", "tasks": [{"name": "x", "kind": "noop"}]},
             "params": {"k": "v"}},
        {"name": "d", "depends_on": ["c"], "workflow": "child.yaml"},
    ],
}


@pytest.mark.parametrize("data", [FULL, {"name": "min", "tasks": [{"name": "only",
    "kind": "noop"}]}])
def test_round_trips(data: dict[str, Any]) -> None:
    defn = definition_from_dict(data)
    assert definition_to_dict(defn) == data
    assert load_definition(dump_yaml(defn)) == defn
    assert load_definition(canonical_json(defn)) == defn
    assert definition_from_dict(json.loads(canonical_json(defn))) == defn


def test_to_dict_omits_defaults_and_normalises() -> None:
    defn = load_definition(textwrap.dedent("""\
        name: x
        default_queue: default
        result_policy: all_sinks_succeed
        tasks:
          - {name: a, dep_policy: all, num_retries: 0, retry_backoff_max_s: 600.0, kwargs: {},
              kind: noop}
          - {name: b, depends_on: a, timeout_s: 5.0, kind: noop}
        """))
    assert definition_to_dict(defn) == {
        "name": "x", "tasks": [{"name": "a", "kind": "noop"}, {"name": "b",
            "depends_on": ["a"], "timeout_s": 5, "kind": "noop"}]}


def test_hash_ignores_spelling_but_not_content() -> None:
    a = load_definition("name: x\ntasks: [{name: a, kind: noop}, {name: b, depends_on: a, "
        "kind: noop}]\n")
    b = load_definition('{"tasks": [{"name": "a", "dep_policy": "all", "kind": "noop"},'
                         ' {"depends_on": ["a"], "name": "b", "kind": "noop"}], "name": "x"}')
    c = load_definition("name: x\ntasks: [{name: a, kind: noop}, {name: b, depends_on: a, "
        "delay_s: 1, kind: noop}]\n")
    assert definition_hash(a) == definition_hash(b) != definition_hash(c)
    assert len(definition_hash(a)) == 64


def test_transformed_definitions_round_trip_with_merge_nodes() -> None:
    roots = [join(f"r{i}") for i in range(5)]
    leaf = join("leaf", depends_on=tuple(r.name for r in roots))
    defn = sequentialize_fan_in(WorkflowDef("fan", (*roots, leaf)), 2)
    assert any(t.merge for t in defn.tasks)
    assert load_definition(canonical_json(defn)) == defn
    assert load_definition(dump_yaml(defn)) == defn


def test_factory_sub_workflows_have_no_text_form() -> None:
    defn = WorkflowDef("x", (TaskDef("a", workflow=SubWorkflow(factory="pkg.mod:make")),))
    with pytest.raises(ValueError, match="call it first"):
        definition_to_dict(defn)


def test_dump_yaml_is_readable() -> None:
    with registered_kind(ML_KIND):
        text = dump_yaml(load_definition(DIAMOND))
    assert "depends_on: [train-gnn, train-rf]" in text
    assert "depends_on: [featurize]" in text
    assert dump_yaml(definition_from_dict(FULL)).count("|") == 1  # the multi-line cmd

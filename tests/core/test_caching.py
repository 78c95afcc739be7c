"""Task caching, pure parts (dagq.core.caching): max_age, spec checks, the policy a task
gets, the key and its components, the difference between two keys; and engine.seed, which
starts a run with results reused from another."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from dagq.core import engine, values
from dagq.core.caching import (
    COMPONENTS,
    MAX_AGE_S,
    CachePolicy,
    cache_key,
    changed,
    components,
    input_digest,
    parse_age,
    policy_of,
    spec_problems,
)
from dagq.core.model import MappedOutputs, OutputRef, TaskDef, WorkflowDef
from dagq.core.validate import validate

BAD_AGE = ("cache.max_age must be a number of seconds or a duration such as 30m, 12h, 7d "
           "or 2w, got ")

# -- parse_age -------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "seconds"), [
    ("90", 90.0), ("90s", 90.0), ("30m", 1800.0), ("12h", 43200.0), ("7d", 604800.0),
    ("2w", 1209600.0), ("1.5w", 907200.0), ("0.5h", 1800.0), (" 7d ", 604800.0),
    ("7 d", 604800.0), ("0", 0.0), (0, 0.0), (90, 90.0), (2.5, 2.5),
    ("3650d", float(MAX_AGE_S)), (MAX_AGE_S, float(MAX_AGE_S)),
])
def test_parse_age_accepts_seconds_and_durations(value: object, seconds: float) -> None:
    assert parse_age(value) == seconds
    assert isinstance(parse_age(value), float)


@pytest.mark.parametrize(("value", "shown"), [
    ("", "a string ('')"), ("x", "a string ('x')"), ("7y", "a string ('7y')"),
    ("7D", "a string ('7D')"), ("-5m", "a string ('-5m')"), ("1e3", "a string ('1e3')"),
    (".5h", "a string ('.5h')"), ("7d7h", "a string ('7d7h')"), (None, "null"),
    (True, "a boolean (true)"), (False, "a boolean (false)"), (-1, "-1"), ([7], "a list"),
    (float("nan"), "nan"),
])
def test_parse_age_refuses_what_is_not_a_duration(value: object, shown: str) -> None:
    with pytest.raises(ValueError) as exc:
        parse_age(value)
    assert str(exc.value) == BAD_AGE + shown


@pytest.mark.parametrize("value", [MAX_AGE_S + 1, "3651d", "522w", "87601h", float("inf")])
def test_parse_age_refuses_more_than_ten_years(value: object) -> None:
    with pytest.raises(ValueError, match=r"^cache.max_age is at most ten years, got "):
        parse_age(value)


# -- spec_problems ---------------------------------------------------------------------


@pytest.mark.parametrize("value", [
    None, True, False, {}, {"max_age": "7d"}, {"max_age": 60}, {"max_age": None},
    {"version": "2"}, {"version": 3}, {"version": 1.5}, {"params": []},
    {"params": ["epochs", "lr"]}, {"files": ["data.csv"]}, {"files": {"data.csv": "ab12"}},
    {"max_age": "1h", "version": "v", "params": ["a"], "files": ["b"]},
])
def test_spec_problems_of_a_valid_cache_field_are_none(value: object) -> None:
    assert list(spec_problems(value)) == []


@pytest.mark.parametrize(("value", "problems"), [
    (1, [("cache must be true, false or a mapping like {max_age: 7d}, got 1", "cache")]),
    ("yes", [("cache must be true, false or a mapping like {max_age: 7d}, got a string "
              "('yes')", "cache")]),
    ([], [("cache must be true, false or a mapping like {max_age: 7d}, got a list", "cache")]),
    ({"ttl": "7d"}, [("cache has unknown key 'ttl'; allowed: max_age, version, params, "
                      "files, refresh", "cache.ttl")]),
    ({"max_age": "soon"}, [(BAD_AGE + "a string ('soon')", "cache.max_age")]),
    ({"max_age": "11000d"}, [("cache.max_age is at most ten years, got a string ('11000d')",
                              "cache.max_age")]),
    ({"version": [1]}, [("cache.version must be a string, got a list", "cache.version")]),
    ({"version": None}, [("cache.version must be a string, got null", "cache.version")]),
    # a boolean is an int to isinstance(); `version: true` reads as "True" in the key
    ({"version": True}, [("cache.version must be a string, got a boolean (true)",
                          "cache.version")]),
    ({"version": False}, [("cache.version must be a string, got a boolean (false)",
                           "cache.version")]),
    ({"params": "epochs"}, [("cache.params must be a list of names, got a string ('epochs')",
                             "cache.params")]),
    ({"params": [1]}, [("cache.params must be a list of names, got a list", "cache.params")]),
    ({"params": [""]}, [("cache.params must be a list of names, got a list", "cache.params")]),
    ({"files": "data.csv"}, [("cache.files must be a list of names, got a string "
                              "('data.csv')", "cache.files")]),
    ({"files": [None]}, [("cache.files must be a list of names, got a list", "cache.files")]),
])
def test_spec_problems_say_what_is_wrong_and_where(value: object,
                                                    problems: list[tuple[str, str]]) -> None:
    assert list(spec_problems(value)) == problems


def test_spec_problems_lists_every_problem_of_one_mapping() -> None:
    got = list(spec_problems({"ttl": 1, "max_age": "x", "version": {}, "params": "p",
                              "files": 3}))
    assert [at for _, at in got] == ["cache.ttl", "cache.max_age", "cache.version",
                                     "cache.params", "cache.files"]


def test_a_definition_with_cache_version_true_is_refused() -> None:
    for value in (True, "1", 1):
        task_level = WorkflowDef("wf", (TaskDef("a", {"cmd": "x"}, cache={"version": value}),))
        wf_level = WorkflowDef("wf", (TaskDef("a", {"cmd": "x"}),), cache={"version": value})
        got = [(p.message, p.field) for d in (task_level, wf_level) for p in validate(d)]
        if value is True:
            assert got == [("cache.version must be a string, got a boolean (true)",
                            "tasks[0].cache.version"),
                           ("cache.version must be a string, got a boolean (true)",
                            "cache.version")], got
        else:
            assert got == [], got


# -- policy_of -------------------------------------------------------------------------


def test_policy_of_none_or_false_is_no_caching() -> None:
    assert policy_of(None, None) is None
    assert policy_of(False, None) is None
    assert policy_of(None, False) is None


def test_policy_of_true_is_the_default_policy() -> None:
    assert policy_of(True, None) == CachePolicy()
    assert policy_of(None, True) == CachePolicy()
    assert CachePolicy() == CachePolicy(None, "", (), None)


def test_the_task_value_wins_over_the_workflow_value() -> None:
    assert policy_of(False, True) is None  # a task opts out of a cached workflow
    assert policy_of(True, False) == CachePolicy()
    assert policy_of({"version": "t"}, {"version": "w", "max_age": "1h"}) == \
        CachePolicy(None, "t")  # not merged: the task's mapping replaces the workflow's
    assert policy_of(None, {"version": "w"}) == CachePolicy(None, "w")


def test_policy_of_a_mapping() -> None:
    p = policy_of({"max_age": "7d", "version": 2, "params": ["epochs", "lr"],
                   "files": {"data.csv": "ab"}}, None)
    assert p == CachePolicy(604800.0, "2", ("epochs", "lr"), {"data.csv": "ab"})
    assert policy_of({"max_age": 30}, None) == CachePolicy(30.0)
    # a list of file names is digested at submit; before that it keys nothing
    assert policy_of({"files": ["data.csv"]}, None) == CachePolicy()


# -- components and cache_key ----------------------------------------------------------

POLICY = CachePolicy(None, "v1", ("epochs",), {"data.csv": "d1"})
KWARGS: dict[str, Any] = {"cmd": "train --lr 0.1", "cwd": "/w", "env": {"SEED": "1"}}
PARAMS: dict[str, Any] = {"epochs": 3, "unused": "x"}
INPUTS: dict[str, Any] = {"prep": {"rows": 12}, "split": [1, 2]}


def _parts(policy: CachePolicy = POLICY, kwargs: dict[str, Any] = KWARGS,
           params: dict[str, Any] = PARAMS, inputs: dict[str, Any] = INPUTS,
           queue: str = "gpu", item: tuple[bool, Any] = (False, None)) -> dict[str, Any]:
    return components(policy, kwargs, params, inputs, queue, item)


def test_components_keep_every_part_apart() -> None:
    parts = _parts()
    assert set(parts) == set(COMPONENTS)
    assert parts["version"] == "v1" and parts["queue"] == "gpu" and parts["item"] == ""
    assert sorted(parts["inputs"]) == ["prep", "split"]
    assert parts["inputs"]["prep"] == "md5:" + hashlib.md5(
        values.dumps({"rows": 12})).hexdigest()
    assert parts == _parts()  # deterministic
    assert len(cache_key(parts)) == 32


@pytest.mark.parametrize(("component", "variant"), [
    ("command", {"kwargs": {**KWARGS, "cmd": "train --lr 0.2"}}),
    ("command", {"kwargs": {**KWARGS, "cwd": "/elsewhere"}}),
    ("command", {"kwargs": {"call": "m:f", "args": {"a": 1}}}),
    ("env", {"kwargs": {**KWARGS, "env": {"SEED": "2"}}}),
    ("env", {"kwargs": {k: v for k, v in KWARGS.items() if k != "env"} | {"env": {"X": ""}}}),
    ("params", {"params": {"epochs": 4, "unused": "x"}}),
    ("params", {"policy": CachePolicy(None, "v1", ("epochs", "unused"), {"data.csv": "d1"})}),
    ("item", {"item": (True, "f1.csv")}),
    ("inputs", {"inputs": {**INPUTS, "prep": {"rows": 13}}}),
    ("inputs", {"inputs": {"prep": {"rows": 12}}}),
    ("inputs", {"inputs": {**INPUTS, "extra": None}}),
    ("version", {"policy": CachePolicy(None, "v2", ("epochs",), {"data.csv": "d1"})}),
    ("files", {"policy": CachePolicy(None, "v1", ("epochs",), {"data.csv": "d2"})}),
    ("files", {"policy": CachePolicy(None, "v1", ("epochs",), None)}),
    ("queue", {"queue": "cpu"}),
])
def test_each_component_changes_the_key(component: str, variant: dict[str, Any]) -> None:
    base, other = _parts(), _parts(**variant)
    assert cache_key(other) != cache_key(base)
    assert changed(other, base)[0].split(".")[0] == component


def test_what_is_not_a_component_does_not_change_the_key() -> None:
    base = cache_key(_parts())
    # a parameter not listed in cache.params (a command reads it through {params.X},
    # which the rendered command already holds)
    assert cache_key(_parts(params={"epochs": 3, "unused": "y"})) == base
    # max_age decides whether an entry is used, not which one
    assert cache_key(_parts(policy=CachePolicy(60.0, "v1", ("epochs",),
                                               {"data.csv": "d1"}))) == base
    # key order of kwargs, env and inputs
    assert cache_key(_parts(kwargs={"env": {"SEED": "1"}, "cwd": "/w",
                                    "cmd": "train --lr 0.1"})) == base
    assert cache_key(_parts(inputs={"split": [1, 2], "prep": {"rows": 12}})) == base
    # an item counts only for an instance of a mapped task
    assert cache_key(_parts(item=(False, "ignored"))) == base


def test_task_and_workflow_names_are_not_part_of_the_key() -> None:
    # components() takes neither: the same work under another task or workflow name
    # reuses the same entry
    def key_of(workflow: str, task: str) -> str:
        defn = WorkflowDef(workflow, (TaskDef(task, dict(KWARGS), cache=True),),
                           params=PARAMS)
        t = defn.tasks[0]
        policy = policy_of(t.cache, defn.cache)
        assert policy is not None
        return cache_key(components(policy, t.kwargs, defn.params, INPUTS, defn.queue_of(t),
                                    (False, None)))
    assert key_of("train", "fit") == key_of("nightly", "fit") == key_of("train", "fit-again")


def test_an_input_digest_is_the_same_inline_or_stored() -> None:
    value = {"rows": 12, "name": "é", "xs": [1.5, None, True]}
    data = values.dumps(value)
    md5 = hashlib.md5(data).hexdigest()
    ref = OutputRef("outputs/wf/prep/1.json", md5, len(data))
    elsewhere = OutputRef("cache/abc.json", md5, len(data))
    assert input_digest(value) == input_digest(ref) == input_digest(elsewhere) == "md5:" + md5
    inline = _parts(inputs={"prep": value})
    stored = _parts(inputs={"prep": ref})
    assert inline == stored
    assert cache_key(inline) == cache_key(stored)
    # the digest is of the bytes as dagq stores them (values.dumps keeps key order): an
    # output written with its keys in another order is another input (a miss, never a
    # wrong hit)
    reordered = {"xs": [1.5, None, True], "name": "é", "rows": 12}
    assert reordered == value and input_digest(reordered) != input_digest(value)


def test_an_input_digest_tells_values_apart() -> None:
    assert input_digest(None) == "null"
    assert input_digest(1) != input_digest(1.5) != input_digest("1")
    assert input_digest([]) != input_digest({}) != input_digest(None)
    assert input_digest(0) != input_digest(None)


def test_mapped_outputs_are_digested_element_by_element() -> None:
    a, b = {"score": 0.9}, [1, 2, 3]
    data = values.dumps(b)
    ref_b = OutputRef("outputs/wf/fit[1]/1.json", hashlib.md5(data).hexdigest(), len(data))
    inline = MappedOutputs([a, b, None])
    mixed = MappedOutputs([a, ref_b, None])
    assert input_digest(inline) == input_digest(mixed)
    assert _parts(inputs={"fit": inline}) == _parts(inputs={"fit": mixed})
    # order, length and a missing instance all count
    assert input_digest(MappedOutputs([b, a, None])) != input_digest(inline)
    assert input_digest(MappedOutputs([a, b])) != input_digest(inline)
    assert input_digest(MappedOutputs([a, b, {}])) != input_digest(inline)
    # a mapped task's outputs are not the same input as one list output of those values
    assert input_digest(MappedOutputs([a, b])) != input_digest([a, b])


# -- changed ---------------------------------------------------------------------------


def test_changed_names_the_components_in_order() -> None:
    base = _parts()
    assert changed(base, base) == []
    other = _parts(kwargs={"cmd": "x", "env": {"A": "1"}}, queue="cpu",
                   policy=CachePolicy(None, "v9", ("epochs",), {"data.csv": "d1"}))
    assert changed(other, base) == ["command", "env", "version", "queue"]


def test_changed_names_each_input_that_differs() -> None:
    base = _parts(inputs={"a": 1, "b": 2, "c": 3})
    now = _parts(inputs={"a": 1, "b": 20, "d": 4})
    assert changed(now, base) == ["inputs.b", "inputs.c", "inputs.d"]
    assert changed(base, now) == ["inputs.b", "inputs.c", "inputs.d"]


def test_changed_against_a_record_with_inputs_collapsed_or_missing() -> None:
    base = _parts()
    # dagq.protocol.cache keeps one digest for all inputs when they are too many
    collapsed = {**base, "inputs": {"*": "0" * 32}}
    assert changed(base, collapsed) == ["inputs.*", "inputs.prep", "inputs.split"]
    assert changed(base, {}) == [c for c in COMPONENTS if base[c] is not None]
    assert changed({**base, "inputs": None}, base) == ["inputs"]


# -- engine.seed -----------------------------------------------------------------------

CHAIN = WorkflowDef("t", (TaskDef("a"), TaskDef("b", depends_on=("a",)),
                          TaskDef("c", depends_on=("b",)), TaskDef("x")))


def test_seeded_tasks_are_completed_with_their_source_and_what_follows_runs() -> None:
    s = engine.create(CHAIN, "wf2", 0.0)
    ref = OutputRef("outputs/wf1/b/2.json", "m", 3)
    engine.seed(s, 1.0, {"a": ({"n": 1}, None, "wf1/a/1"), "b": (None, ref, "wf1/b/2")})
    assert s.status == "pending"
    assert s.outbox == {}  # seeding sends nothing
    a, b = s.task_view("a"), s.task_view("b")
    assert (a.status, a.output, a.output_ref, a.note) == (
        "completed", {"n": 1}, None, "reused: the result of wf1/a/1")
    assert (b.status, b.output, b.output_ref, b.note) == (
        "completed", None, ref, "reused: the result of wf1/b/2")
    fx = engine.start(s, 2.0)
    assert sorted(d.task for d in fx.dispatched) == ["c", "x"]
    assert s.inputs_of("c") == {"b": ref}
    assert s.task_view("c").status == "running" and s.task_view("a").status == "completed"
    again = engine.loads(engine.dumps(s))  # the notes and outputs are stored
    assert again.task_view("b").note == "reused: the result of wf1/b/2"
    assert again.task_view("b").output_ref == ref
    fx = engine.apply(s, [engine.Completion("c", 1, True), engine.Completion("x", 1, True)],
                      3.0)
    assert s.status == "completed"


def test_a_workflow_seeded_whole_completes_when_started() -> None:
    s = engine.create(WorkflowDef("t", (TaskDef("a"), TaskDef("b", depends_on=("a",)))),
                      "wf", 0.0)
    engine.seed(s, 1.0, {"a": (1, None, "o/a/1"), "b": (2, None, "o/b/1")})
    fx = engine.start(s, 2.0)
    assert fx.dispatched == []
    assert s.status == "completed" and s.counts() == {"completed": 2}


def test_a_condition_after_a_seeded_task_reads_its_output() -> None:
    defn = WorkflowDef("t", (TaskDef("a"),
                             TaskDef("yes", depends_on=("a",), condition="inputs.a.n > 0"),
                             TaskDef("no", depends_on=("a",), condition="inputs.a.n < 0")))
    s = engine.create(defn, "wf", 0.0)
    engine.seed(s, 1.0, {"a": ({"n": 1}, None, "o/a/1")})
    engine.start(s, 2.0)
    assert s.task_view("yes").status == "running"
    assert s.task_view("no").status == "skipped"


def test_mapped_tasks_are_not_seeded() -> None:
    defn = WorkflowDef("t", (
        TaskDef("fit", {"cmd": "fit {item}"}, map={"over": "params.files"}),
        TaskDef("reduce", {"cmd": "x"}, ("fit",))), params={"files": ["f1", "f2"]})
    s = engine.create(defn, "wf", 0.0)
    engine.seed(s, 1.0, {"fit": ([1, 2], None, "o/fit/1")})
    assert s.task_view("fit").status == "pending" and s.task_view("fit").note is None
    engine.start(s, 2.0)
    assert sorted(t for t, _ in s.running()) == ["fit[0]", "fit[1]"]
    assert s.task_view("reduce").status == "pending"


def test_seed_refuses_a_started_workflow() -> None:
    s = engine.create(CHAIN, "wf", 0.0)
    engine.start(s, 1.0)
    with pytest.raises(ValueError, match="only a workflow that has not started can be seeded"):
        engine.seed(s, 2.0, {"a": (1, None, "o/a/1")})
    assert s.task_view("a").status == "running" and s.task_view("a").note is None


def test_refresh_keeps_the_policy_and_a_plain_rerun_drops_it() -> None:
    from dagq.core.caching import refreshed
    from dagq.ops.rerun import _settled

    assert refreshed(None, {"max_age": "7d"}) == {"max_age": "7d", "refresh": True}
    assert refreshed(True, None) == {"refresh": True}
    assert refreshed(None, None) is None and refreshed(False, True) is False
    policy = policy_of({"version": "2", "refresh": True}, None)
    assert policy is not None and policy.refresh and policy.version == "2"
    assert _settled({"version": "2", "refresh": True}) == {"version": "2"}
    assert _settled({"refresh": True}) is True and _settled(None) is None
    assert list(spec_problems({"refresh": "yes"})) == [
        ("cache.refresh must be true or false, got a string ('yes')", "cache.refresh")]

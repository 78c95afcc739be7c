"""Tests of the condition language: compile, references, evaluate."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagq.core.condition import Condition, cached_condition, compile_condition
from dagq.core.model import OutputRef
from dagq.errors import ConditionError


def ev(expr: str, inputs: dict[str, Any]) -> tuple[bool, str | None]:
    return compile_condition(expr).evaluate(inputs)


# -- the reference examples -------------------------------------------------------------


def test_single_input_threshold() -> None:
    cond = compile_condition("inputs.train.mae < 0.1")
    assert cond.names == {"train"} and cond.patterns == frozenset()
    assert cond.evaluate({"train": {"mae": 0.05}}) == (True, None)
    assert cond.evaluate({"train": {"mae": 0.5}}) == (False, None)


def test_multi_input_with_bracket_names() -> None:
    cond = compile_condition('inputs["train-rf"].mae < 0.1 and inputs["train-gnn"].mae < 0.1')
    assert cond.names == {"train-rf", "train-gnn"}
    assert cond.evaluate({"train-rf": {"mae": 0.01}, "train-gnn": {"mae": 0.02}}) == (True, None)
    assert cond.evaluate({"train-rf": {"mae": 0.01}, "train-gnn": {"mae": 0.2}}) == (False, None)


def test_bracket_name_with_slash() -> None:
    assert ev('inputs["prep/featurize"].passed', {"prep/featurize": {"passed": True}}) == (
        True,
        None,
    )


LOSSES = {"train-a": {"loss": 0.001}, "train-b": {"loss": 0.005}, "eval": {"loss": 0.5}}


@pytest.mark.parametrize(
    ("expr", "inputs", "expected"),
    [
        ("all(inputs.*.loss < 0.01)", {k: v for k, v in LOSSES.items() if k != "eval"}, True),
        ("all(inputs.*.loss < 0.01)", LOSSES, False),
        ('all(inputs["train-*"].loss < 0.01)', LOSSES, True),
        ('any(inputs["train-*"].converged)', {"train-a": {"converged": False}}, False),
        (
            'any(inputs["train-*"].converged)',
            {"train-a": {"converged": False}, "train-b": {"converged": True}},
            True,
        ),
        (
            'count(inputs["*"].passed) >= 3',
            {f"t{i}": {"passed": i % 2 == 0} for i in range(5)},
            True,
        ),
        (
            'count(inputs["*"].passed) >= 3',
            {f"t{i}": {"passed": i % 2 == 0} for i in range(4)},
            False,
        ),
        (
            'almost_all(inputs["worker-*"].loss < 0.1, 5)',
            {f"worker-{i}": {"loss": 0.5 if i < 5 else 0.0} for i in range(20)},
            True,
        ),
        (
            'almost_all(inputs["worker-*"].loss < 0.1, 5)',
            {f"worker-{i}": {"loss": 0.5 if i < 6 else 0.0} for i in range(20)},
            False,
        ),
        (
            'all(inputs["train-*"].loss < 0.01) and inputs.prep.status == "ok"',
            {**LOSSES, "prep": {"status": "ok"}},
            True,
        ),
        (
            'all(inputs["train-*"].loss < 0.01) and inputs.prep.status == "ok"',
            {**LOSSES, "prep": {"status": "failed"}},
            False,
        ),
    ],
)
def test_reference_aggregate_examples(expr: str, inputs: dict[str, Any], expected: bool) -> None:
    assert ev(expr, inputs) == (expected, None)


# -- comparisons, booleans, literals ------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("1 == 1", True),
        ("1 == 1.0", True),
        ("1 != 2", True),
        ("1 < 2", True),
        ("2 <= 2", True),
        ("3 > 2", True),
        ("2 >= 3", False),
        ('"abc" < "abd"', True),
        ("0 < 1 < 2", True),
        ("0 < 2 < 1", False),
        ("1 == 1 != 2", True),
        ("1 in [1, 2]", True),
        ("3 not in [1, 2]", True),
        ('"b" in "abc"', True),
        ('"x" in "abc"', False),
        ("[1, [2, 3]] == [1, [2, 3]]", True),
        ('1 == "1"', False),
        ('1 != "1"', True),
        ("True == 1", False),
        ("true == True and false == False and null == None", True),
        ("None == null", True),
        ("1e3 == 1000", True),
        ("2.5E-1 == 0.25", True),
        (".5 == 0.5", True),
        ("-1 < 0", True),
        ("-2.5e1 == -25", True),
        ("not 1 == 2", True),
        ("not (1 == 1 and 2 == 3)", True),
        ("1 == 2 or 2 == 2", True),
        ("1 == 1 or 1 < 'a'", True),
        ("1 == 2 and 1 < 'a'", False),
        ("(1 == 2 or 2 == 2) and 3 == 3", True),
        ("1 == 2 or 2 == 2 and 3 == 4", False),
        ("not not True", True),
        ("[]", False),
        ("[0]", True),
        ("'it\\'s' == \"it's\"", True),
        ('"a\\tb\\u00e9\\x41\\U0001F600" == "a\tb\u00e9A\U0001f600"', True),
        ("'\\\\' in 'a\\\\b'", True),
        ("[1, 2,] == [1, 2]", True),
        ("[] == []", True),
    ],
)
def test_expressions_without_inputs(expr: str, expected: bool) -> None:
    assert ev(expr, {}) == (expected, None)


def test_string_escapes_decode_like_python() -> None:
    assert ev('inputs.s == "a\\n\\r\\0\\\\"', {"s": "a\n\r\0\\"}) == (True, None)
    with pytest.raises(ConditionError, match="unterminated string"):
        compile_condition("inputs.s == 'raw\nnewline'")


def test_in_with_object_keys_and_inputs() -> None:
    inputs = {"a": {"metrics": {"f1": 0.9}, "tags": ["gpu", "fast"], "status": "ok"}}
    assert ev('"f1" in inputs.a.metrics', inputs) == (True, None)
    assert ev('"auc" not in inputs.a.metrics', inputs) == (True, None)
    assert ev('"gpu" in inputs.a.tags', inputs) == (True, None)
    assert ev('inputs.a.status in ["ok", "warn"]', inputs) == (True, None)
    assert ev("1 in inputs.a.metrics", inputs) == (False, None)


# -- references ---------------------------------------------------------------------------

DATA = {
    "a": {
        "metrics": {"f1": 0.92, "nested": {"deep": [10, 20, {"x": "y"}]}},
        "items": [1, 2, 3],
        "name": "model",
        "ok": True,
        "zero": 0,
    },
    "b": 5,
    "skipped": None,
}


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ('inputs.a.metrics["f1"] > 0.9', True),
        ("inputs.a.metrics.f1 > 0.9", True),
        ('inputs["a"]["metrics"].nested.deep[2].x == "y"', True),
        ("inputs.a.items[0] == 1", True),
        ("inputs.a.items[-1] == 3", True),
        ("inputs.a.items[- 3] == 1", True),
        ("inputs.a.items[3] == None", True),
        ("inputs.a.items[-4] == null", True),
        ('inputs.a.name[0] == "m"', True),
        ("inputs.a.missing == None", True),
        ("inputs.a.missing.deeper[0].x == None", True),
        ("inputs.nobody == None", True),
        ("inputs.skipped.anything == None", True),
        ("inputs.skipped", False),
        ("inputs.a.ok", True),
        ("inputs.a.zero", False),
        ("not inputs.a.zero", True),
        ("inputs.b == 5", True),
        ("inputs.a.if == None", True),
        ("inputs.a.items == [1, 2, 3]", True),
    ],
)
def test_reference_paths(expr: str, expected: bool) -> None:
    assert ev(expr, DATA) == (expected, None)


def test_and_or_yield_operands_like_python() -> None:
    assert ev("(inputs.a.missing or 0) < 1", DATA) == (True, None)
    assert ev("(inputs.a.zero and 'x') == 0", DATA) == (True, None)


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ("inputs.missing.x < 0.1", "cannot order null and a number"),
        ("inputs.a.name < 1", "cannot order a string and a number"),
        ("inputs.a.ok < 2", "cannot order a boolean and a number"),
        ("inputs.b.field == 1", "cannot take field 'field' of a number"),
        ("inputs.a.items.x == 1", "cannot take field 'x' of a list"),
        ("inputs.a.metrics[0] == 1", 'use ["0"] for an object key'),
        ("inputs.b[0] == 1", "cannot index a number"),
        ("1 in inputs.b", "'in' needs a list, string or object"),
        ("1 in inputs.a.name", "cannot look for a number in a string"),
        ("[1] < [2]", "cannot order a list and a list"),
    ],
)
def test_type_errors_make_the_condition_false_with_a_note(expr: str, fragment: str) -> None:
    result, note = ev(expr, DATA)
    assert result is False
    assert note is not None and fragment in note
    # also when negated: a type error is not "false, so not() is true"
    assert ev(f"not ({expr})", DATA)[0] is False


def test_note_quotes_the_failing_comparison() -> None:
    _, note = ev("inputs.x == 1 and inputs.train.mae < 0.1", {"x": 1})
    assert note is not None and note.startswith("inputs.train.mae < 0.1:")


# -- aggregates ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("all(inputs['t-*'].ok)", True),
        ("any(inputs['t-*'].ok)", False),
        ("count(inputs['t-*'].ok) == 0", True),
        ("almost_all(inputs['t-*'].ok, 0)", True),
    ],
)
def test_aggregates_over_no_match(expr: str, expected: bool) -> None:
    result, note = ev(expr, {"other": {"ok": True}})
    assert result is expected
    assert note is not None and "no input matches 't-*'" in note


GLOB_INPUTS = {
    "w-1": {"ok": True},
    "w-2": {"ok": False},
    "w-10": {"ok": True},
    "wx": {"ok": True},
    "v-1": {"ok": False},
}


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("count(inputs['w-?'].ok)", 1),
        ("count(inputs['w-*'].ok)", 2),
        ("count(inputs['[vw]-1'].ok)", 1),
        ("count(inputs['[!v]*'].ok)", 3),
        ("count(inputs.*.ok)", 3),
        ("count(not inputs.*.ok)", 2),
    ],
)
def test_glob_selection(expr: str, expected: int) -> None:
    assert ev(f"{expr} == {expected}", GLOB_INPUTS) == (True, None)


def test_glob_matching_is_case_sensitive() -> None:
    assert ev("count(inputs['W-*'].ok) == 0", GLOB_INPUTS)[0] is True


def test_count_is_a_number_and_almost_all_threshold() -> None:
    assert ev("count(inputs['w-*'].ok) > 1 and count(inputs['w-*'].ok) < 3", GLOB_INPUTS)[0]
    assert ev("almost_all(inputs['w-*'].ok, 1)", GLOB_INPUTS)[0] is True
    assert ev("almost_all(inputs['*'].ok, 1)", GLOB_INPUTS)[0] is False
    assert ev("almost_all(inputs['*'].ok, 2)", GLOB_INPUTS)[0] is True


def test_aggregate_body_can_mix_pattern_and_direct_inputs() -> None:
    inputs = {"base": {"loss": 0.3}, "t-1": {"loss": 0.1, "ok": True}, "t-2": {"loss": 0.2}}
    assert ev("all(inputs['t-*'].loss < inputs.base.loss)", inputs)[0] is True
    assert ev("any(inputs['t-*'].ok and inputs['t-*'].loss < 0.15)", inputs)[0] is True
    cond = compile_condition("all(inputs['t-*'].loss < inputs.base.loss)")
    assert cond.names == {"base"} and cond.patterns == {"t-*"}


def test_type_error_inside_aggregate_names_the_input() -> None:
    result, note = ev("all(inputs.*.loss < 0.01)", {"a": {"loss": 0.001}, "b": {}})
    assert result is False
    assert note is not None and "'b'" in note and "cannot order null" in note


# -- lazy resolution of stored outputs ----------------------------------------------------


class CountingResolver:
    def __init__(self, store: dict[str, Any], fail: set[str] | None = None) -> None:
        self.store = store
        self.fail = fail or set()
        self.calls: list[str] = []

    def __call__(self, ref: OutputRef) -> Any:
        self.calls.append(ref.name)
        if ref.name in self.fail:
            raise OSError(f"blob {ref.name} is gone")
        return self.store[ref.name]


def ref(name: str) -> OutputRef:
    return OutputRef(name, "0" * 32, 10)


def test_resolve_only_what_is_touched_and_once_per_call() -> None:
    resolver = CountingResolver({"A": {"x": 1}, "B": {"x": 2}, "C": {"x": 3}})
    inputs = {"a": ref("A"), "b": ref("B"), "c": ref("C")}
    cond = compile_condition("(inputs.a.x == 1 or inputs.b.x == 2) and inputs.a.x < 5")
    assert cond.evaluate(inputs, resolver) == (True, None)
    assert resolver.calls == ["A"]
    assert cond.evaluate(inputs, resolver) == (True, None)
    assert resolver.calls == ["A", "A"]  # the cache lives for one call only


def test_resolve_stops_at_the_deciding_input_of_an_aggregate() -> None:
    resolver = CountingResolver({f"T{i}": {"ok": i == 2} for i in range(6)})
    inputs = {f"t-{i}": ref(f"T{i}") for i in reversed(range(6))}
    assert compile_condition("any(inputs['t-*'].ok)").evaluate(inputs, resolver) == (True, None)
    assert resolver.calls == ["T0", "T1", "T2"]  # sorted order, then short-circuit


def test_mixed_inline_and_stored_outputs() -> None:
    resolver = CountingResolver({"B": {"x": 2}})
    assert ev("inputs.a.x == 1", {"a": {"x": 1}, "b": ref("B")}) == (True, None)
    cond = compile_condition("inputs.a.x == 1 and inputs.b.x == 2")
    assert cond.evaluate({"a": {"x": 1}, "b": ref("B")}, resolver) == (True, None)
    assert resolver.calls == ["B"]


def test_resolve_failure_makes_the_condition_false() -> None:
    resolver = CountingResolver({}, fail={"A"})
    result, note = compile_condition("not inputs.a.x").evaluate({"a": ref("A")}, resolver)
    assert result is False
    assert note is not None and "could not read the output of 'a'" in note and "gone" in note


def test_stored_output_without_resolver() -> None:
    result, note = compile_condition("inputs.a == None").evaluate({"a": ref("A")})
    assert result is False and note is not None and "no resolver" in note


# -- rejections ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "position", "fragment"),
    [
        ('__import__("os")', 0, "'__'"),
        ("inputs.a.__class__", 9, "'__'"),
        ('open("x")', 0, "calling open() is not allowed"),
        ("[x for x in y]", 3, "comprehensions"),
        ("inputs.a + 1", 9, "arithmetic (+)"),
        ("inputs.a.x * 2 > 1", 11, "arithmetic (*)"),
        ("inputs.a.x / 2 > 1", 11, "arithmetic (/)"),
        ("inputs.a.x > 1 - 1", 15, "arithmetic (-)"),
        ("-inputs.a.x > 1", 0, "unary minus only applies to number literals"),
        ("+1 > 0", 0, "arithmetic"),
        ("inputs.train-rf.mae < 0.1", 12, 'inputs["train-rf"]'),
        ("lambda: 1", 0, "lambda"),
        ('f"{inputs}"', 0, "f-strings"),
        ("(x := 1)", 3, ":="),
        ("inputs.a.items[1:2]", 16, "slices"),
        ("inputs.a.items[:2]", 15, "slices"),
        ("inputs.a.x if True else 1", 11, "conditional expressions"),
        ("inputs.a is None", 9, "'is' is not supported"),
        ("x == 1", 0, "unknown name 'x'"),
        ("params.x == 1", 0, "unknown name 'params'"),
        ("inputs.a.x.keys()", 15, "can be called"),
        ('"abc".upper()', 5, "attribute access is only allowed on inputs"),
        ("[1, 2][0]", 6, "indexing is only allowed on inputs"),
        ("inputs", 6, "inputs must be followed by"),
        ("inputs.1", 6, "inputs must be followed by"),
        ("inputs[0].x", 7, "must be string literals"),
        ("inputs[inputs.a.x]", 7, "must be string literals"),
        ("inputs.a[inputs.b.k]", 9, "index must be a string or integer literal"),
        ("inputs.a.items[1.5]", 15, "index must be a string or integer literal"),
        ("inputs.a.items.0", 14, "use [0]"),
        ('inputs["t-*"].loss < 1', 0, "only be used inside all()"),
        ("inputs.*.loss < 1", 0, "only be used inside all()"),
        ("all(inputs.a.ok and inputs.b.ok)", 0, "needs a glob-selected input"),
        ("all(inputs['a-*'].x and inputs['b-*'].x)", 24, "only one glob pattern"),
        ("all(any(inputs.*.x))", 4, "cannot be nested"),
        ("all", 0, "must be called"),
        ("all(inputs.*.x, 2)", 14, "exactly one argument"),
        ("almost_all(inputs.*.x)", 21, "expected ','"),
        ("almost_all(inputs.*.x, -1)", 23, "non-negative integer"),
        ("almost_all(inputs.*.x, n=1)", 23, "non-negative integer"),
        ("almost_all(inputs.*.x, 1.5)", 23, "non-negative integer"),
        ("sum(inputs.*.x) > 1", 0, "calling sum()"),
        ("inputs.a = 1", 9, "use '=='"),
        ("inputs.a & inputs.b", 9, "use 'and'"),
        ("!inputs.a", 0, "use 'not'"),
        ("{1: 2}", 0, "dict and set literals"),
        ("(1, 2)", 2, "tuples"),
        ("1 == 1; 2", 6, "';'"),
        ("1 ==", 4, "expected a value"),
        ("(1 == 1", 7, "expected ')'"),
        ("1 == 1)", 6, "unmatched ')'"),
        ("[1, 2", 5, "expected ']'"),
        ("'abc", 0, "unterminated string"),
        ("'a\\qb'", 2, "unknown escape"),
        ("'\\x4'", 1, "hex digits"),
        ("1x == 1", 0, "malformed number"),
        ("1 == 1 $", 7, "unexpected character"),
        ("inputs.a.x == 1 2", 16, "expected 'and', 'or'"),
        ("", 0, "empty"),
        ("   ", 3, "empty"),
        ("1 and", 5, "expected a value"),
        ("and 1", 0, "expected a value before or after 'and'"),
        ("inputs.a not 1", 9, "expected 'and', 'or'"),
    ],
)
def test_rejections_point_at_the_token(expr: str, position: int, fragment: str) -> None:
    with pytest.raises(ConditionError) as info:
        compile_condition(expr)
    err = info.value
    assert fragment in err.message
    assert err.expression == expr
    assert err.position == position, (err.position, str(err))
    assert str(err).endswith("\n    " + " " * position + "^")


def test_size_limits() -> None:
    compile_condition("1 == 1 and " * 370 + "True")
    with pytest.raises(ConditionError, match="too long"):
        compile_condition("1 == 1 and " * 400 + "True")
    compile_condition("(" * 32 + "1" + ")" * 32)
    with pytest.raises(ConditionError, match="nested too deeply") as info:
        compile_condition("(" * 33 + "1" + ")" * 33)
    assert info.value.position == 32
    with pytest.raises(ConditionError, match="nested too deeply"):
        compile_condition("[" * 33 + "]" * 33)
    with pytest.raises(ConditionError, match="nested too deeply"):
        compile_condition("not " * 33 + "1")
    compile_condition("1 in [" + ",".join("1" * 1000) + "]")
    with pytest.raises(ConditionError, match="more than 1000 items"):
        compile_condition("1 in [" + ",".join("1" * 1001) + "]")


# -- references and the public object ----------------------------------------------------


def test_names_and_patterns() -> None:
    cond = compile_condition('count(inputs.*.ok) > 1 and inputs["x/y"].a and inputs.z')
    assert cond.names == {"x/y", "z"}
    assert cond.patterns == {"*"}
    assert cond.source == 'count(inputs.*.ok) > 1 and inputs["x/y"].a and inputs.z'


def test_unknown_references() -> None:
    cond = compile_condition(
        'inputs.train.mae < 0.1 and inputs.trian.x and inputs.other and any(inputs["ev-*"].ok)'
    )
    problems = cond.unknown_references(["train", "train-b", "eval"])
    assert len(problems) == 3
    assert "'trian'" in problems[0] and "did you mean 'train'" in problems[0]
    assert "'other'" in problems[1] and "depends_on" in problems[1]
    assert "'ev-*'" in problems[2] and "matches none" in problems[2]
    assert cond.unknown_references(["train", "trian", "other", "ev-1"]) == []


def test_cached_condition_and_equality() -> None:
    a = cached_condition("inputs.a.x == 1")
    assert cached_condition("inputs.a.x == 1") is a
    assert a == compile_condition("inputs.a.x == 1")
    assert isinstance(a, Condition) and "inputs.a.x == 1" in repr(a)
    with pytest.raises(ConditionError):
        cached_condition("inputs.a +")


# -- properties ---------------------------------------------------------------------------

TOKENS = [
    "inputs",
    ".",
    "a",
    "b",
    "x",
    "*",
    "[",
    "]",
    "(",
    ")",
    ",",
    '"t-*"',
    "'b'",
    "0",
    "-1",
    "1.5e3",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "in",
    "not",
    "and",
    "or",
    "True",
    "null",
    "all",
    "any",
    "count",
    "almost_all",
    "+",
    ":",
    "__x",
    "open",
    "'\\n'",
    '"',
]
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False)
    | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abx"), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60) | st.lists(st.sampled_from(TOKENS), max_size=14).map(" ".join))
def test_any_text_compiles_or_raises_condition_error(text: str) -> None:
    try:
        cond = compile_condition(text)
    except ConditionError as err:
        assert err.position is None or 0 <= err.position <= len(text)
        return
    assert cond.source == text


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(TOKENS), min_size=1, max_size=12).map(" ".join),
    st.dictionaries(st.sampled_from(["a", "b", "t-1", "t-2"]), VALUES, max_size=4),
)
def test_compiled_conditions_never_raise(text: str, inputs: dict[str, Any]) -> None:
    try:
        cond = compile_condition(text)
    except ConditionError:
        return
    result, note = cond.evaluate(inputs)
    assert isinstance(result, bool)
    assert note is None or (isinstance(note, str) and "evaluation failed" not in note)

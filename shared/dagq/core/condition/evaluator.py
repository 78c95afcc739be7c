"""Tree-walking evaluator of the condition language.

Values are JSON values (``None``, bool, int, float, str, list, dict). Semantics:

* a missing input, field or list index gives null, and any path through null is null;
* taking a field of a non-object, or indexing something that is not a list or string,
  is a type error;
* ``==``/``!=`` compare any two values; booleans equal only booleans (``true != 1``),
  ints and floats compare numerically, lists and objects compare element-wise;
* ``< <= > >=`` order two numbers or two strings; anything else is a type error;
* ``in`` tests membership in a list, a substring of a string, or a key of an object;
* ``and``/``or`` short-circuit and yield an operand, as in Python; truthiness is Python's.

A type error stops evaluation: the condition is false and the reason is returned.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from dagq.core.condition.nodes import (
    Aggregate,
    BoolOp,
    Compare,
    Const,
    ListLit,
    Node,
    Not,
    Ref,
)
from dagq.core.model import MappedOutputs, OutputRef

Resolver = Callable[[OutputRef], Any]
_ZERO_MATCH_RESULT = {"all": True, "any": False, "count": 0, "almost_all": True}


class EvalFailure(Exception):
    """Internal: evaluation cannot go on; ``message`` says why (becomes the note)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def type_name(value: object) -> str:
    """The JSON type name of ``value`` for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def equal(a: object, b: object) -> bool:
    """JSON equality: see the module docstring."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if type(a) is not type(b) and not (isinstance(a, str) and isinstance(b, str)):
        return False
    return bool(a == b)


def _contains(item: object, container: object, text: str) -> bool:
    if isinstance(container, list | tuple):
        return any(equal(item, x) for x in container)
    if isinstance(container, str):
        if not isinstance(item, str):
            raise EvalFailure(f"{text}: cannot look for {type_name(item)} in a string")
        return item in container
    if isinstance(container, Mapping):
        return isinstance(item, str) and item in container
    raise EvalFailure(
        f"{text}: 'in' needs a list, string or object on the right, got {type_name(container)}"
    )


def _order(op: str, a: Any, b: Any, text: str) -> bool:
    if not ((_is_number(a) and _is_number(b)) or (isinstance(a, str) and isinstance(b, str))):
        raise EvalFailure(
            f"{text}: cannot order {type_name(a)} and {type_name(b)} with {op!r} "
            "(only two numbers or two strings)"
        )
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)


class Evaluator:
    """Evaluates one tree against one set of inputs; resolved outputs are cached."""

    def __init__(self, inputs: Mapping[str, Any], resolve: Resolver | None) -> None:
        self.inputs = inputs
        self.resolve = resolve
        self.cache: dict[str, Any] = {}
        self.binding: str | None = None
        self.notes: list[str] = []

    def input_value(self, name: str) -> Any:
        """The output of input ``name`` (null if absent), resolved at most once."""
        if name in self.cache:
            return self.cache[name]
        value = self.inputs.get(name)
        if type(value) is MappedOutputs and self.resolve is not None:
            try:
                value = [self.resolve(v) if isinstance(v, OutputRef) else v for v in value]
            except Exception as exc:
                raise EvalFailure(f"could not read an output of {name!r}: {exc}") from exc
        elif isinstance(value, OutputRef):
            if self.resolve is None:
                raise EvalFailure(
                    f"the output of {name!r} is in output storage and no resolver was given"
                )
            try:
                value = self.resolve(value)
            except Exception as exc:
                raise EvalFailure(f"could not read the output of {name!r}: {exc}") from exc
        self.cache[name] = value
        return value

    def eval(self, node: Node) -> Any:
        """The value of ``node``."""
        if isinstance(node, Const):
            return node.value
        if isinstance(node, Ref):
            return self.ref(node)
        if isinstance(node, Compare):
            return self.compare(node)
        if isinstance(node, BoolOp):
            value: Any = node.op == "and"
            for operand in node.operands:
                value = self.eval(operand)
                if bool(value) != (node.op == "and"):
                    return value
            return value
        if isinstance(node, Not):
            return not self.eval(node.operand)
        if isinstance(node, ListLit):
            return [self.eval(item) for item in node.items]
        return self.aggregate(node)

    def ref(self, node: Ref) -> Any:
        name = node.name if node.name is not None else self.binding
        assert name is not None, "pattern reference outside an aggregate"
        value = self.input_value(name)
        for key in node.path:
            if value is None:
                return None
            if isinstance(key, str):
                if not isinstance(value, Mapping):
                    raise EvalFailure(
                        f"{node.text}: cannot take field {key!r} of {type_name(value)}"
                    )
                value = value.get(key)
            elif isinstance(value, list | tuple | str):
                value = value[key] if -len(value) <= key < len(value) else None
            else:
                hint = f' (use ["{key}"] for an object key)' if isinstance(value, Mapping) else ""
                raise EvalFailure(f"{node.text}: cannot index {type_name(value)} with {key}{hint}")
        return value

    def compare(self, node: Compare) -> bool:
        left = self.eval(node.first)
        for link in node.links:
            right = self.eval(link.right)
            op = link.op
            if op == "==":
                ok = equal(left, right)
            elif op == "!=":
                ok = not equal(left, right)
            elif op == "in":
                ok = _contains(left, right, link.text)
            elif op == "not in":
                ok = not _contains(left, right, link.text)
            else:
                ok = _order(op, left, right, link.text)
            if not ok:
                return False
            left = right
        return True

    def aggregate(self, node: Aggregate) -> bool | int:
        if node.items_of is not None:
            return self.over_items(node, node.items_of)
        names = sorted(n for n in self.inputs if fnmatchcase(n, node.pattern))
        if not names:
            result = _ZERO_MATCH_RESULT[node.func]
            self.notes.append(f"no input matches {node.pattern!r}, so {node.func}() is {result}")
            return result
        passed = failed = 0
        try:
            for name in names:
                self.binding = name
                try:
                    ok = bool(self.eval(node.body))
                except EvalFailure as exc:
                    raise EvalFailure(f"{node.func}() at input {name!r}: {exc.message}") from exc
                passed += ok
                failed += not ok
                if node.func == "all" and not ok:
                    return False
                if node.func == "any" and ok:
                    return True
                if node.func == "almost_all" and failed > node.threshold:
                    return False
        finally:
            self.binding = None
        if node.func == "count":
            return passed
        return node.func != "any"

    def over_items(self, node: Aggregate, name: str) -> bool | int:
        """An aggregate over the elements of one list input (a mapped task's outputs)."""
        items = self.input_value(name)
        if not isinstance(items, list):
            raise EvalFailure(f"{node.func}() over inputs.{name} needs a list (the outputs of "
                              f"a mapped task), got {type_name(items)}")
        if not items:
            result = _ZERO_MATCH_RESULT[node.func]
            self.notes.append(f"inputs.{name} is empty, so {node.func}() is {result}")
            return result
        passed = failed = 0
        try:
            for k, item in enumerate(items):
                self.cache[name] = item
                try:
                    ok = bool(self.eval(node.body))
                except EvalFailure as exc:
                    raise EvalFailure(f"{node.func}() at inputs.{name}[{k}]: "
                                      f"{exc.message}") from exc
                passed += ok
                failed += not ok
                if node.func == "all" and not ok:
                    return False
                if node.func == "any" and ok:
                    return True
                if node.func == "almost_all" and failed > node.threshold:
                    return False
        finally:
            self.cache[name] = items
        if node.func == "count":
            return passed
        return node.func != "any"

"""A small evaluator for the Bicep expressions used in infra/, over pycep-parser's JSON.

pycep gives a syntax tree but no values; these helpers resolve parameters, variables,
loops, conditionals and a few functions so tests can read app settings and names as
they would be deployed. Anything it cannot resolve stays a `Sym` (symbolic text).
"""

from __future__ import annotations

import re
from typing import Any, cast

from pycep import BicepParser

Templates = dict[str, dict[str, Any]]

_PARSER = BicepParser()


def parse(text: str) -> dict[str, Any]:
    """Parse Bicep source; raises the parser's error on bad syntax."""
    return cast(dict[str, Any], _PARSER.parse(text=text))


class Sym(str):
    """An expression the evaluator leaves symbolic (resource property, unbound name)."""


def path_of(node: Any) -> list[str] | None:
    """Flatten pycep's right-nested property accessors into ["a", "b", "c"]."""
    if isinstance(node, str):
        return [node]
    op = node.get("operator", {}) if isinstance(node, dict) else {}
    if op.get("type") != "property_accessor":
        return None
    left, right = path_of(op["operands"]["operand_1"]), path_of(op["operands"]["operand_2"])
    return None if left is None or right is None else left + right


class Evaluator:
    """Evaluates the subset of Bicep expressions these templates use."""

    def __init__(self, template: dict[str, Any], params: dict[str, Any]) -> None:
        self.variables = {k: v["value"] for k, v in template.get("variables", {}).items()}
        self.env: dict[str, Any] = {name: Sym(name) for name in template.get("parameters", {})}
        self.env.update(params)

    def __call__(self, node: Any, env: dict[str, Any] | None = None) -> Any:
        env = self.env if env is None else env
        if node is None or isinstance(node, bool | int | float):
            return node
        if isinstance(node, str):
            if node in env:
                return env[node]
            if node in self.variables:
                return self(self.variables[node], env)
            return re.sub(r"\$\{(\w+)\}", lambda m: self._text(m.group(1), env), node)
        if isinstance(node, list):
            return [self(item, env) for item in node]
        if "loop_type" in node:
            return self._loop(node, env)
        if set(node) == {"operator"}:
            return self._operator(node, env)
        if set(node) == {"function"}:
            return self._function(node["function"], env)
        return {key: self(value, env) for key, value in node.items()}

    def _text(self, name: str, env: dict[str, Any]) -> str:
        value = self(name, env)
        return f"${{{value}}}" if isinstance(value, Sym) else str(value)

    def _loop(self, node: dict[str, Any], env: dict[str, Any]) -> list[Any]:
        detail = node["loop_type"]["detail"]
        out = []
        for index, item in enumerate(self(detail["array_name"], env)):
            scope = {**env, detail["item_name"]: item}
            if "index_name" in detail:
                scope[detail["index_name"]] = index
            if node.get("condition") is None or self(node["condition"], scope):
                out.append(self(node["config"], scope))
        return out

    def _operator(self, node: dict[str, Any], env: dict[str, Any]) -> Any:
        kind, ops = node["operator"]["type"], node["operator"]["operands"]
        if kind == "conditional":
            branch = "true_value" if self(ops["condition"], env) else "false_value"
            return self(ops[branch], env)
        if kind == "equals":
            return self(ops["operand_1"], env) == self(ops["operand_2"], env)
        if kind == "not":
            return not self(ops["bool_value"], env)
        path = path_of(node)
        return Sym(".".join(path)) if path else Sym(kind)

    def _function(self, fn: dict[str, Any], env: dict[str, Any]) -> Any:
        args = [self(arg, env) for arg in fn["parameters"].values()]
        kind = fn["type"]
        if kind == "concat":
            if isinstance(args[0], list):
                return [item for arg in args for item in arg]
            return "".join(map(str, args))
        if kind == "replace":
            return str(args[0]).replace(args[1], args[2])
        if kind == "string":
            return args[0] if isinstance(args[0], Sym) else str(args[0])
        if kind == "empty":
            return not args[0]
        return Sym(kind)


def body_of(config: dict[str, Any]) -> dict[str, Any]:
    """The resource/module body, below pycep's optional condition/loop wrapper."""
    wrapped = "config" in config and "name" not in config
    inner: dict[str, Any] = config["config"] if wrapped else config
    return inner

"""Definition text -> data, keeping the YAML nodes to put line numbers on problems.

JSON is read with the json module; when a JSON definition has problems it is composed
as YAML (JSON is YAML) so that its problems get line numbers too.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from dagq.errors import DefinitionError, Problem

MAX_EXPANDED_NODES = 10_000_000
"""Limit on the size of a YAML document once its aliases are expanded."""

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STR, _MAP, _SEQ = (f"tag:yaml.org,2002:{t}" for t in ("str", "map", "seq"))
_SPECIAL_KEYS = {"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"}


def read_json(text: str, source: str | None, strict: bool) -> tuple[Any, bool] | None:
    """``(data, has duplicate keys)``; None if not JSON and not ``strict``."""
    duplicates = False

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal duplicates
        result = dict(pairs)
        duplicates = duplicates or len(result) != len(pairs)
        return result

    try:
        return json.loads(text, object_pairs_hook=pairs_hook), duplicates
    except json.JSONDecodeError as exc:
        if not strict:
            return None
        problem = Problem(f"invalid JSON: {exc.msg}", line=exc.lineno, column=exc.colno)
        raise DefinitionError([problem], source) from None
    except RecursionError:
        raise DefinitionError([Problem("the JSON is nested too deeply")], source) from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise DefinitionError([Problem(f"invalid JSON: {_digits(exc)}")], source) from None


def read_yaml(text: str, source: str | None) -> tuple[Node | None, Any, list[Problem]]:
    """``(root node, data, duplicate-key problems)``; raise ``DefinitionError`` if malformed."""
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, None, []
        if "*" in text:  # only aliases can make the data bigger than the text
            size = _expanded_size(root)
            if size is None or size > MAX_EXPANDED_NODES:
                why = ("refers to itself through an alias" if size is None else
                       f"expands to more than {MAX_EXPANDED_NODES:,} values through aliases")
                raise DefinitionError([Problem(f"the YAML {why}; write the values out")],
                                      source)
        builder = _Builder(loader)
        return root, builder.build(root), builder.duplicates
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(x for x in (exc.context, exc.problem) if x)
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
        problem = Problem(f"invalid YAML: {what}", line=line, column=column)
        raise DefinitionError([problem], source) from None
    except yaml.reader.ReaderError as exc:
        line, column = position(text, exc.position)
        problem = Problem(f"invalid YAML: character {exc.character!r} is not allowed",
                          line=line, column=column)
        raise DefinitionError([problem], source) from None
    except (yaml.YAMLError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise DefinitionError([Problem(f"invalid YAML: {why}")], source) from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise DefinitionError([Problem(f"invalid YAML: {_digits(exc)}")], source) from None
    finally:
        loader.dispose()


def _digits(exc: ValueError) -> str:
    if "digits" in str(exc):
        return ("an integer has more than 4300 digits (the most dagq reads); write it "
                "as a string")
    return str(exc)


def compose_quietly(text: str) -> Node | None:
    """The YAML node tree of ``text``, or None if it is not YAML."""
    try:
        return yaml.compose(text, Loader=_Loader)
    except (yaml.YAMLError, RecursionError):
        return None


def duplicate_keys(root: Node) -> list[Problem]:
    """Problems for keys given twice in one mapping of the tree ``root``."""
    builder = _Builder(_Loader(""))
    with contextlib.suppress(yaml.YAMLError, RecursionError, TypeError):
        builder.build(root)
    return builder.duplicates


def position(text: str, offset: int | None) -> tuple[int, int]:
    """1-based ``(line, column)`` of ``offset`` in ``text`` (its end if None)."""
    before = text if offset is None else text[:offset]
    return before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1


class _Builder:
    """Builds plain data from nodes, faster than PyYAML's constructor for common nodes."""

    def __init__(self, loader: yaml.SafeLoader) -> None:
        self.loader = loader
        self.memo: dict[int, Any] = {}
        self.duplicates: list[Problem] = []

    def build(self, node: Node) -> Any:
        kind = type(node)
        if kind is ScalarNode:
            return node.value if node.tag == _STR else self.loader.construct_object(node, True)
        if id(node) in self.memo:  # an alias: share the value, as PyYAML does
            return self.memo[id(node)]
        if kind is MappingNode and node.tag == _MAP and all(
                type(k) is ScalarNode and k.tag not in _SPECIAL_KEYS for k, _ in node.value):
            result: dict[Any, Any] = {}
            self.memo[id(node)] = result
            for key_node, value_node in node.value:
                key = self.build(key_node)
                if key in result:
                    mark = key_node.start_mark
                    self.duplicates.append(Problem(
                        f"duplicate key {key!r}: only one value would be kept; remove the "
                        "other", line=mark.line + 1, column=mark.column + 1))
                result[key] = self.build(value_node)
            return result
        if kind is SequenceNode and node.tag == _SEQ:
            items: list[Any] = []
            self.memo[id(node)] = items
            items.extend(self.build(child) for child in node.value)
            return items
        return self.loader.construct_object(node, True)


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return list(node.value) if isinstance(node, SequenceNode) else []


def _expanded_size(root: Node) -> int | None:
    """Number of nodes once aliases are expanded; None if the graph has a cycle."""
    sizes: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in _children(node))
            active.discard(id(node))
        elif id(node) in active:
            return None
        elif id(node) not in sizes:
            active.add(id(node))
            stack.append((node, True))
            stack.extend((c, False) for c in _children(node))
    return sizes[id(root)]


_SEGMENT = re.compile(r'\.?([A-Za-z_$][\w$-]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def locate(root: Node, path: str) -> yaml.Mark:
    """Mark of the field at ``path`` (of its key), or of the nearest ancestor present."""
    node, mark = root, root.start_mark
    for match in _SEGMENT.finditer(path):
        word, number, quoted = match.groups()
        if number is not None:
            if not isinstance(node, SequenceNode) or int(number) >= len(node.value):
                break
            node = node.value[int(number)]
            mark = node.start_mark
            continue
        key = word if word is not None else json.loads(quoted)
        if not isinstance(node, MappingNode):
            break
        for key_node, value_node in reversed(node.value):
            if isinstance(key_node, ScalarNode) and key_node.value == key:
                node, mark = value_node, key_node.start_mark
                break
        else:
            break
    return mark


def with_lines(problems: list[Problem], root: Node | None) -> list[Problem]:
    """``problems`` with the line and column of their field, sorted by position."""
    if root is None:
        return problems
    located = []
    for p in problems:
        if p.line is None and p.field is not None:
            mark = locate(root, p.field)
            p = Problem(p.message, task=p.task, field=p.field, line=mark.line + 1,
                        column=mark.column + 1)
        located.append(p)
    return sorted(located, key=lambda p: (p.line is None, p.line or 0, p.column or 0))

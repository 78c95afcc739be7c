"""Syntax tree of the condition language: small immutable nodes, walked by the evaluator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dagq.core.condition.lexer import Scalar

CompareOp = Literal["==", "!=", "<", "<=", ">", ">=", "in", "not in"]
AggregateFunc = Literal["all", "any", "count", "almost_all"]
AGGREGATES: frozenset[str] = frozenset({"all", "any", "count", "almost_all"})


@dataclass(frozen=True, slots=True)
class Const:
    """A literal number, string, boolean or null."""

    value: Scalar


@dataclass(frozen=True, slots=True)
class ListLit:
    """A list literal ``[a, b, ...]``; items may be any expression."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Ref:
    """A path into one input: ``inputs.NAME.field[0]`` or a glob-selected ``inputs["t-*"].x``.

    Exactly one of ``name`` and ``pattern`` is set. A pattern reference is bound to one
    matching input at a time by the enclosing aggregate.
    """

    name: str | None
    pattern: str | None
    path: tuple[str | int, ...]
    """Field names (strings) and list indexes (ints), applied left to right."""
    text: str
    """The reference as written, for messages."""


@dataclass(frozen=True, slots=True)
class Not:
    """``not operand``."""

    operand: Node


@dataclass(frozen=True, slots=True)
class BoolOp:
    """``a and b and ...`` or ``a or b or ...`` with Python's short-circuit semantics."""

    op: Literal["and", "or"]
    operands: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Comparison:
    """One link of a comparison chain: ``<op> right``; ``text`` is the link as written."""

    op: CompareOp
    right: Node
    text: str


@dataclass(frozen=True, slots=True)
class Compare:
    """``first op1 x1 op2 x2 ...``: true when every link holds (chained like Python)."""

    first: Node
    links: tuple[Comparison, ...]


@dataclass(frozen=True, slots=True)
class Aggregate:
    """``all/any/count/almost_all(body[, threshold])`` over inputs matching ``pattern``."""

    func: AggregateFunc
    body: Node
    pattern: str
    threshold: int = 0
    """For ``almost_all``: how many matching inputs may fail ``body``."""
    items_of: str | None = None
    """Set instead of ``pattern``: the input whose value, a list (such as the outputs of
    a mapped task), is iterated; the body sees one element at a time as that input."""


Node = Const | ListLit | Ref | Not | BoolOp | Compare | Aggregate

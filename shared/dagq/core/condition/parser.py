"""Recursive-descent parser of the condition language.

Grammar (lowest precedence first)::

    expr       := and_expr ("or" and_expr)*
    and_expr   := not_expr ("and" not_expr)*
    not_expr   := "not" not_expr | comparison
    comparison := operand (("=="|"!="|"<"|"<="|">"|">="|"in"|"not" "in") operand)*
    operand    := "-" NUMBER | NUMBER | STRING | constant | list | "(" expr ")"
                | reference | aggregate
    reference  := "inputs" ("." NAME | "." "*" | "[" STRING "]") ("." NAME | "[" key "]")*
    key        := STRING | "-"? INTEGER
    aggregate  := ("all"|"any"|"count") "(" expr ")" | "almost_all" "(" expr "," INTEGER ")"

Anything else is rejected with a ConditionError pointing at the offending token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dagq.core.condition import lexer as lx
from dagq.core.condition.lexer import CONSTANTS, OPERATOR_HINTS, Token, tokenize
from dagq.core.condition.nodes import (
    AGGREGATES,
    Aggregate,
    AggregateFunc,
    BoolOp,
    Compare,
    CompareOp,
    Comparison,
    Const,
    ListLit,
    Node,
    Not,
    Ref,
)
from dagq.errors import ConditionError


@dataclass
class _AggregateScope:
    func: str
    pattern: str | None = None
    names: list[str] = field(default_factory=list)  # inputs named in the body


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens = tokenize(source)
        self.i = 0
        self.depth = 0
        self.scope: _AggregateScope | None = None
        self.names: list[str] = []
        self.patterns: list[str] = []

    # -- token helpers -------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        tok = self.tokens[self.i]
        if tok.kind != "end":
            self.i += 1
        return tok

    def at(self, kind: str, text: str | None = None, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok.kind == kind and (text is None or tok.text == text)

    def error(self, message: str, tok: Token) -> ConditionError:
        return ConditionError(message, self.source, tok.pos)

    def expect_op(self, text: str, context: str) -> Token:
        if not self.at("op", text):
            tok = self.peek()
            raise self.error(f"expected {text!r} {context}, found {tok.describe()}", tok)
        return self.advance()

    def prev_end(self) -> int:
        prev = self.tokens[self.i - 1]
        return prev.pos + len(prev.text)

    def enter(self, tok: Token) -> None:
        self.depth += 1
        if self.depth > lx.MAX_DEPTH:
            raise self.error(
                f"condition is nested too deeply (more than {lx.MAX_DEPTH} levels)", tok)

    # -- entry ---------------------------------------------------------------------------

    def parse(self) -> Node:
        if self.at("end"):
            raise self.error("condition is empty", self.peek())
        node = self.expr()
        tok = self.peek()
        if tok.kind != "end":
            if tok.kind == "op" and tok.text in (")", "]"):
                raise self.error(f"unmatched {tok.text!r}", tok)
            self.reject_operator(tok)
            raise self.error(
                f"unexpected {tok.describe()}; expected 'and', 'or', a comparison "
                "or the end of the condition",
                tok,
            )
        return node

    # -- expressions ---------------------------------------------------------------------

    def expr(self) -> Node:
        operands = [self.and_expr()]
        while self.at("name", "or"):
            self.advance()
            operands.append(self.and_expr())
        return operands[0] if len(operands) == 1 else BoolOp("or", tuple(operands))

    def and_expr(self) -> Node:
        operands = [self.not_expr()]
        while self.at("name", "and"):
            self.advance()
            operands.append(self.not_expr())
        return operands[0] if len(operands) == 1 else BoolOp("and", tuple(operands))

    def not_expr(self) -> Node:
        if self.at("name", "not"):
            tok = self.advance()
            self.enter(tok)
            node = Not(self.not_expr())
            self.depth -= 1
            return node
        return self.comparison()

    def comparison(self) -> Node:
        start = self.peek().pos
        first = self.operand()
        links: list[Comparison] = []
        while True:
            tok = self.peek()
            op: CompareOp
            if tok.kind == "op" and tok.text in lx.COMPARE_OPS:
                op = tok.text  # type: ignore[assignment]
                self.advance()
            elif tok.kind == "name" and tok.text == "in":
                op = "in"
                self.advance()
            elif tok.kind == "name" and tok.text == "not" and self.at("name", "in", 1):
                op = "not in"
                self.advance()
                self.advance()
            else:
                break
            right_start = self.peek().pos
            right = self.operand()
            links.append(Comparison(op, right, self.source[start : self.prev_end()]))
            start = right_start
        return first if not links else Compare(first, tuple(links))

    def operand(self) -> Node:
        tok = self.peek()
        if tok.kind == "op" and tok.text == "-":
            self.advance()
            num = self.peek()
            if num.kind != "num":
                raise self.error("unary minus only applies to number literals", tok)
            self.advance()
            assert isinstance(num.value, int | float)
            node: Node = Const(-num.value)
        else:
            node = self.primary()
        nxt = self.peek()
        if nxt.kind == "op":
            if nxt.text in lx.ARITHMETIC:
                hint = ""
                if isinstance(node, Ref) and nxt.text == "-" and self.at("name", ahead=1):
                    last = node.path[-1] if node.path else node.name
                    if node.text.endswith(f".{last}"):
                        head = node.text.removesuffix(f".{last}")
                        example = f'{head}["{last}-{self.peek(1).text}"]'
                        hint = f"; names with dashes need brackets, e.g. {example}"
                raise self.error(
                    f"arithmetic ({nxt.text}) is not supported in conditions{hint}", nxt
                )
            if nxt.text == "(":
                raise self.error("only all(), any(), count() and almost_all() can be called", nxt)
            if nxt.text == ".":
                raise self.error("attribute access is only allowed on inputs paths", nxt)
            if nxt.text == "[":
                raise self.error("indexing is only allowed on inputs paths", nxt)
        return node

    def reject_operator(self, tok: Token) -> None:
        if tok.kind == "op" and tok.text in OPERATOR_HINTS:
            raise self.error(OPERATOR_HINTS[tok.text], tok)

    def primary(self) -> Node:
        tok = self.peek()
        if tok.kind in ("num", "str"):
            self.advance()
            return Const(tok.value)
        if tok.kind == "name":
            return self.name(tok)
        if tok.kind == "op" and tok.text == "(":
            self.advance()
            self.enter(tok)
            node = self.expr()
            if self.at("op", ","):
                raise self.error("tuples are not supported; use a list [...]", self.peek())
            self.expect_op(")", "to close '('")
            self.depth -= 1
            return node
        if tok.kind == "op" and tok.text == "[":
            return self.list_literal(tok)
        self.reject_operator(tok)
        if tok.kind == "op" and tok.text in lx.ARITHMETIC:
            raise self.error(
                f"unexpected {tok.describe()}: arithmetic is not supported in conditions", tok
            )
        raise self.error(f"expected a value, found {tok.describe()}", tok)

    def name(self, tok: Token) -> Node:
        self.advance()
        if tok.text in CONSTANTS:
            return Const(CONSTANTS[tok.text])
        if tok.text == "inputs":
            return self.reference(tok)
        calls = self.at("op", "(")
        if tok.text in AGGREGATES:
            if not calls:
                raise self.error(f"{tok.text} must be called: {tok.text}(...)", tok)
            return self.aggregate(tok)
        if calls:
            raise self.error(
                f"calling {tok.text}() is not allowed; the only functions are all, any, "
                "count and almost_all",
                tok,
            )
        if tok.text in ("and", "or", "not", "in"):
            raise self.error(f"expected a value before or after {tok.text!r}", tok)
        raise self.error(
            f"unknown name {tok.text!r}; conditions use inputs.NAME, literals and "
            "all/any/count/almost_all",
            tok,
        )

    def list_literal(self, open_tok: Token) -> Node:
        self.advance()
        self.enter(open_tok)
        items: list[Node] = []
        while not self.at("op", "]"):
            if len(items) >= lx.MAX_LIST_ITEMS:
                raise self.error(f"list has more than {lx.MAX_LIST_ITEMS} items", self.peek())
            items.append(self.expr())
            if not self.at("op", ","):
                break
            self.advance()
        self.expect_op("]", "to close the list")
        self.depth -= 1
        return ListLit(tuple(items))

    # -- references and aggregates -------------------------------------------------------

    def reference(self, inputs_tok: Token) -> Ref:
        name: str | None = None
        pattern: str | None = None
        tok = self.peek()
        if self.at("op", "."):
            self.advance()
            sel = self.advance()
            if sel.kind == "name":
                name = sel.text
            elif sel.kind == "op" and sel.text == "*":
                pattern = "*"
            else:
                raise self.error(
                    f"expected an input name after 'inputs.', found {sel.describe()}", sel
                )
        elif self.at("op", "["):
            self.advance()
            sel = self.advance()
            if sel.kind != "str":
                raise self.error(
                    'input names in inputs[...] must be string literals, e.g. inputs["prep"]', sel
                )
            assert isinstance(sel.value, str)
            if lx.GLOB_CHARS & set(sel.value):
                pattern = sel.value
            else:
                name = sel.value
            self.expect_op("]", "after the input name")
        else:
            raise self.error(
                'inputs must be followed by .NAME, ["NAME"] or a glob such as ["train-*"]', tok
            )
        if pattern is not None:
            if self.scope is None:
                raise self.error(
                    f"glob pattern {pattern!r} can only be used inside all(), any(), count() "
                    "or almost_all()",
                    inputs_tok,
                )
            if self.scope.pattern is None:
                self.scope.pattern = pattern
            elif self.scope.pattern != pattern:
                raise self.error(
                    f"{self.scope.func}() can use only one glob pattern; found "
                    f"{self.scope.pattern!r} and {pattern!r}",
                    inputs_tok,
                )
            self.patterns.append(pattern)
        else:
            assert name is not None
            self.names.append(name)
            if self.scope is not None:
                self.scope.names.append(name)
        path = self.path()
        return Ref(name, pattern, tuple(path), self.source[inputs_tok.pos : self.prev_end()])

    def path(self) -> list[str | int]:
        path: list[str | int] = []
        while True:
            tok = self.peek()
            if tok.kind == "num" and tok.text.startswith("."):
                raise self.error(f"use [{tok.text[1:]}] to index a list", tok)
            if self.at("op", "."):
                self.advance()
                field = self.advance()
                if field.kind != "name":
                    raise self.error(
                        f"expected a field name after '.', found {field.describe()}", field
                    )
                path.append(field.text)
            elif self.at("op", "["):
                self.advance()
                path.append(self.key())
                if self.at("op", ":"):
                    raise self.error("slices are not supported in conditions", self.peek())
                self.expect_op("]", "after the index")
            else:
                return path

    def key(self) -> str | int:
        tok = self.advance()
        sign = 1
        if tok.kind == "op" and tok.text == "-":
            sign = -1
            tok = self.advance()
        if tok.kind == "str" and sign == 1:
            assert isinstance(tok.value, str)
            return tok.value
        if tok.kind == "num" and isinstance(tok.value, int):
            return sign * tok.value
        if tok.kind == "op" and tok.text == ":":
            raise self.error("slices are not supported in conditions", tok)
        raise self.error(
            f"an index must be a string or integer literal, found {tok.describe()}", tok
        )

    def aggregate(self, func_tok: Token) -> Aggregate:
        if self.scope is not None:
            raise self.error(
                f"aggregates cannot be nested ({func_tok.text}() inside {self.scope.func}())",
                func_tok,
            )
        self.advance()  # "("
        self.enter(func_tok)
        self.scope = scope = _AggregateScope(func_tok.text)
        body = self.expr()
        self.scope = None
        threshold = 0
        if func_tok.text == "almost_all":
            self.expect_op(",", "then the number of inputs allowed to fail")
            tok = self.advance()
            if tok.kind != "num" or not isinstance(tok.value, int):
                raise self.error(
                    "the second argument of almost_all() must be a non-negative integer "
                    f"literal, found {tok.describe()}",
                    tok,
                )
            threshold = tok.value
        elif self.at("op", ","):
            raise self.error(f"{func_tok.text}() takes exactly one argument", self.peek())
        self.expect_op(")", f"to close {func_tok.text}(")
        self.depth -= 1
        func: AggregateFunc = func_tok.text  # type: ignore[assignment]
        if scope.pattern is None:
            if len(listed := set(scope.names)) != 1:
                raise self.error(f'{func_tok.text}() needs a glob-selected input such as '
                                 'inputs["train-*"].x or inputs.*.x, or one list input such '
                                 "as a mapped task's outputs (inputs.fit.loss)", func_tok)
            return Aggregate(func, body, "", threshold, items_of=listed.pop())
        return Aggregate(func, body, scope.pattern, threshold)


def parse(source: str) -> tuple[Node, tuple[str, ...], tuple[str, ...]]:
    """Parse ``source``; return the tree, direct input names and glob patterns (in order)."""
    parser = _Parser(source)
    node = parser.parse()
    return node, tuple(dict.fromkeys(parser.names)), tuple(dict.fromkeys(parser.patterns))

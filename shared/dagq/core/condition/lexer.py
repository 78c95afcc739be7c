"""Tokenizer of the condition language (see ``dagq.core.condition``).

Turns an expression into a flat list of tokens with their character offsets, so that
the parser can point at the exact place of any problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from dagq.errors import ConditionError

MAX_LENGTH = 4096
"""Longest accepted expression, in characters."""
MAX_DEPTH = 32
"""Deepest accepted nesting of parentheses, lists, ``not`` and aggregates."""
MAX_LIST_ITEMS = 1000
"""Most items accepted in one list literal."""
GLOB_CHARS = frozenset("*?[")
"""Characters that make a reference a glob pattern."""
COMPARE_OPS = frozenset({"==", "!=", "<", "<=", ">", ">="})
"""Comparison operators."""
ARITHMETIC = frozenset({"+", "-", "*", "/", "//", "%", "**", "@", "~", "^"})
"""Operators the language does not have (named in the error when used)."""

TokenKind = Literal["num", "str", "name", "op", "end"]
Scalar = None | bool | int | float | str
"""A literal value: what a JSON scalar can be."""


@dataclass(frozen=True, slots=True)
class Token:
    """One token: its kind, its source text, its 0-based offset and its literal value."""

    kind: TokenKind
    text: str
    pos: int
    value: Scalar = None

    def describe(self) -> str:
        """The token as a user reads it in an error message."""
        if self.kind == "end":
            return "the end of the expression"
        if self.kind == "num":
            return f"number {self.text}"
        if self.kind == "str":
            return f"string {self.text}"
        return repr(self.text)


_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<num>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<name>[^\W\d]\w*)
  | (?P<str>['"])
  | (?P<op>\*\*|//|==|!=|<=|>=|:=|->|[-+*/%@<>=!()\[\]{},.:;~&|^])
    """,
    re.VERBOSE,
)
_STRING_PREFIXES = frozenset({"f", "r", "b", "u", "rb", "br", "fr", "rf"})
_SIMPLE_ESCAPES = {
    "\\": "\\",
    "'": "'",
    '"': '"',
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "0": "\0",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
CONSTANTS: dict[str, Scalar] = {
    "True": True,
    "False": False,
    "None": None,
    "true": True,
    "false": False,
    "null": None,
}
"""Words that stand for literal values."""
OPERATOR_HINTS = {
    "=": "'=' is not a comparison; use '=='",
    "!": "'!' is not supported; use 'not'",
    "&": "'&' is not supported; use 'and'",
    "|": "'|' is not supported; use 'or'",
    ":": "slices and dict literals are not supported in conditions",
    "{": "dict and set literals are not supported in conditions",
    ";": "a condition is a single expression; ';' is not allowed",
    "->": "'->' is not allowed in conditions",
}
"""Operators that are not part of the language, with what to write instead."""
_FORBIDDEN_WORDS = {
    "lambda": "lambda expressions are not allowed in conditions",
    "for": "comprehensions are not allowed in conditions",
    "if": "conditional expressions (x if c else y) are not allowed in conditions",
    "else": "conditional expressions (x if c else y) are not allowed in conditions",
    "is": "'is' is not supported; compare with == or != (e.g. inputs.a.x == null)",
    "import": "imports are not allowed in conditions",
    "yield": "'yield' is not allowed in conditions",
    "await": "'await' is not allowed in conditions",
}


def tokenize(source: str) -> list[Token]:
    """Split ``source`` into tokens, ending with an ``end`` token.

    Raises ConditionError for characters that cannot start a token, unterminated or
    prefixed strings, bad escapes and malformed numbers.
    """
    if len(source) > MAX_LENGTH:
        raise ConditionError(
            f"condition is too long ({len(source)} characters; at most {MAX_LENGTH})",
            source[:80] + "...",
            None,
        )
    tokens: list[Token] = []
    pos = 0
    n = len(source)
    while pos < n:
        m = _TOKEN_RE.match(source, pos)
        if m is None:
            raise ConditionError(f"unexpected character {source[pos]!r}", source, pos)
        kind = m.lastgroup
        text = m.group()
        if kind == "ws":
            pos = m.end()
            continue
        if kind == "str":
            value, end = _read_string(source, pos)
            tokens.append(Token("str", source[pos:end], pos, value))
            pos = end
            continue
        if kind == "num":
            end = m.end()
            if end < n and (source[end].isalnum() or source[end] == "_"):
                raise ConditionError(f"malformed number {text + source[end]!r}...", source, pos)
            number: int | float = float(text) if any(c in text for c in ".eE") else int(text)
            tokens.append(Token("num", text, pos, number))
        elif kind == "name":
            if m.end() < n and source[m.end()] in "'\"" and text.lower() in _STRING_PREFIXES:
                raise ConditionError(
                    f"prefixed strings ({text}'...', f-strings, raw or byte strings) are not "
                    "supported; use a plain quoted string",
                    source,
                    pos,
                )
            tokens.append(Token("name", text, pos))
        else:
            tokens.append(Token("op", text, pos))
        pos = m.end()
    tokens.append(Token("end", "", n))
    _reject_forbidden(source, tokens)
    return tokens


def _reject_forbidden(source: str, tokens: list[Token]) -> None:
    """Reject Python-only words, walrus and dunder names anywhere, before parsing."""
    for k, tok in enumerate(tokens):
        if tok.kind == "op" and tok.text == ":=":
            raise ConditionError(
                "assignment expressions (:=) are not allowed in conditions", source, tok.pos
            )
        if tok.kind != "name":
            continue
        if tok.text.startswith("__"):
            raise ConditionError(
                f"names starting with '__' are not allowed ({tok.text})", source, tok.pos
            )
        after_dot = k > 0 and tokens[k - 1].kind == "op" and tokens[k - 1].text == "."
        if not after_dot and tok.text in _FORBIDDEN_WORDS:
            raise ConditionError(_FORBIDDEN_WORDS[tok.text], source, tok.pos)


def _read_string(source: str, start: int) -> tuple[str, int]:
    """Read the quoted string starting at ``start``; return its value and end offset."""
    quote = source[start]
    out: list[str] = []
    i = start + 1
    n = len(source)
    while i < n:
        c = source[i]
        if c == quote:
            return "".join(out), i + 1
        if c == "\n":
            break
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:
            break
        e = source[i + 1]
        if e in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[e])
            i += 2
        elif e in _HEX_ESCAPES:
            width = _HEX_ESCAPES[e]
            digits = source[i + 2 : i + 2 + width]
            if len(digits) != width or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConditionError(f"bad escape \\{e}: expected {width} hex digits", source, i)
            code = int(digits, 16)
            if code > 0x10FFFF:
                raise ConditionError(f"bad escape \\{e}{digits}: not a code point", source, i)
            out.append(chr(code))
            i += 2 + width
        else:
            raise ConditionError(
                f"unknown escape \\{e} in string; write \\\\ for a backslash", source, i
            )
    raise ConditionError("unterminated string: the closing quote is missing", source, start)

"""Where each ``{params.NAME}`` stands in a ``/bin/sh -c`` command line, and how a value
is written there so that the shell reads it as exactly that text and runs nothing.

:func:`scan` reads a ``cmd`` template the way a POSIX shell (dash, or bash in POSIX
mode) tokenises it and gives each placeholder one of three contexts:

- ``word``: outside any quotes (also inside ``$(...)``, which starts afresh): the value
  is written single-quoted, ``'`` as ``'\\''``;
- ``single``: inside ``'...'``: the value with each ``'`` written ``'\\''``;
- ``double``: inside ``"..."``: the value with ``\\``, ``$``, a backquote and ``"``
  escaped by a backslash (a newline stays as it is: ``\\`` + newline would vanish).

A placeholder is *refused* (:attr:`Slot.refused` says why) where no quoting makes a
value plain text: inside backquotes, ``${...}``, ``$((...))``, ``((...))``, ``$[...]``,
``[[ ... ]]`` (bash evaluates its ``-eq`` operands) or a ``name[...]`` array subscript,
``$'...'``, ``$"..."``, a comment or the arguments of ``eval``; right after a ``\\``
or a ``$``; after a here-document (``<<``), a ``case`` inside ``$(...)`` or anything
else where dash and bash could disagree about what follows; and anywhere in a command
that ends inside unclosed quotes.

The guarantee is about the ``/bin/sh`` that runs ``cmd``: a program that is handed the
value and treats it as code (``eval``, ``sh -c``, ``python -c``, an awk program, bash
arithmetic on a variable holding it) is beyond what quoting can protect. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass

PLACEHOLDER_RE = re.compile(r"\{\{params\.([A-Za-z_]\w*)\}\}|\{params\.([A-Za-z_]\w*)\}")
"""``{{params.NAME}}`` (group 1: the literal text ``{params.NAME}``) or ``{params.NAME}``
(group 2: a placeholder)."""
WORD, SINGLE, DOUBLE = "word", "single", "double"
"""The contexts a value can be written in (see the module docstring)."""
_DQ_SPECIAL = re.compile(r'([\\$`"])')
_NAME = re.compile(r"[A-Za-z_]\w*")
_NAMES = {"sq": "'...'", "dq": '"..."', "ansi": "$'...'", "bq": "backquotes `...`",
          "brace": "${...}", "arith": "arithmetic $((...))", "bracket": "arithmetic $[...]",
          "sub": "$(...)"}
_TEST = ("[[ ... ]] (bash reads the operands of -eq, -lt and the like as arithmetic, "
         "which can run commands; use [ ... ])")


@dataclass(frozen=True)
class Slot:
    """One ``{params.NAME}`` in a command template and where it stands."""

    name: str
    """The parameter's name."""
    line: int
    """1-based line of the template it is on."""
    context: str
    """``word``, ``single`` or ``double`` (meaningless when refused)."""
    refused: str | None = None
    """Why no value can be written there safely (``None``: it can)."""


Piece = str | Slot
"""Literal text of the command line, or a placeholder."""


def quote(value: str, context: str) -> str:
    """``value`` written so that, in ``context``, the shell reads exactly that text."""
    if context == DOUBLE:
        return _DQ_SPECIAL.sub(r"\\\1", value)
    escaped = value.replace("'", "'\\''")
    return escaped if context == SINGLE else f"'{escaped}'"


def scan(template: str, names: Container[str] | None = None) -> list[Piece]:
    """``template`` as literal text and placeholders, in order. ``{{params.NAME}}`` is
    the text ``{params.NAME}``, and so is ``{params.NAME}`` when ``names`` (the values
    at hand) lacks ``NAME``; with ``names`` None every ``{params.NAME}`` is a slot."""
    units: list[str | tuple[str, int]] = []
    at = 0
    for match in PLACEHOLDER_RE.finditer(template):
        units.extend(template[at:match.start()])
        literal, name = match.group(1), match.group(2)
        if literal is not None:
            units.extend("{params." + literal + "}")
        elif names is not None and name not in names:
            units.extend(match.group(0))
        else:
            units.append((name, template.count("\n", 0, match.start()) + 1))
        at = match.end()
    units.extend(template[at:])
    return _Lexer(units).run()


class _Frame:
    """One open construct: ``script`` (the command line, or the inside of ``$(...)``
    when ``sub``) or one of the kinds named in ``_NAMES`` (and ``comment``)."""

    __slots__ = ("depth", "dollar", "eval", "index", "kind", "sub", "test", "word",
                 "word_start")

    def __init__(self, kind: str, *, sub: bool = False, dollar: bool = False) -> None:
        self.kind, self.sub, self.dollar = kind, sub, dollar
        self.depth = 0
        self.word_start = True
        self.word: str | None = None
        self.test = False
        """Inside ``[[ ... ]]``."""
        self.eval = False
        """In a simple command with the word ``eval``."""
        self.index = 0
        """Open ``[`` of a ``name[...]`` array subscript (bash reads one to its ``]``,
        blanks and operators included)."""


class _Lexer:
    def __init__(self, units: list[str | tuple[str, int]]) -> None:
        self.units = units
        self.stack = [_Frame("script")]
        self.pieces: list[Piece] = []
        self.text: list[str] = []
        self.forced: dict[int, str] = {}
        self.uncertain: str | None = None

    def peek(self, i: int) -> str | tuple[str, int] | None:
        return self.units[i] if i < len(self.units) else None

    def doubt(self, why: str) -> None:
        if self.uncertain is None:
            self.uncertain = why

    def push(self, kind: str, **flags: bool) -> None:
        self.stack.append(_Frame(kind, **flags))

    def run(self) -> list[Piece]:
        i = 0
        while i < len(self.units):
            unit = self.units[i]
            if isinstance(unit, tuple):
                self.slot(i, *unit)
                i += 1
                continue
            handle = getattr(self, "on_" + self.stack[-1].kind)
            nxt: int = handle(i, unit)
            self.text.extend(u for u in self.units[i:nxt] if isinstance(u, str))
            i = nxt
        if self.text:
            self.pieces.append("".join(self.text))
        open_ = [f for f in self.stack[1:] if f.kind != "comment"]
        if open_:
            what = "$(...)" if open_[-1].kind == "script" else _NAMES[open_[-1].kind]
            why = f"stands in a command that ends inside an unclosed {what}"
            self.pieces = [p if isinstance(p, str) or p.refused else
                           Slot(p.name, p.line, p.context, why) for p in self.pieces]
        return self.pieces

    def slot(self, i: int, name: str, line: int) -> None:
        top = self.stack[-1]
        context, refused = WORD, self.uncertain or self.forced.get(i)
        script = next(f for f in reversed(self.stack) if f.kind == "script")
        if refused is None and script.eval:
            refused = "stands in an eval command, which runs its arguments as shell code"
        elif refused is None and script.test:
            refused = f"stands inside {_TEST}"
        elif refused is None and script.index:
            refused = ("stands in a name[...] array subscript (bash reads it as arithmetic, "
                       "which can run commands)")
        if top.kind == "script":
            top.word_start, top.word = False, None
        elif top.kind == "sq":
            context = SINGLE
        elif top.kind == "dq" and not top.dollar:
            context = DOUBLE
        elif refused is None:
            where = "a comment (after #)" if top.kind == "comment" else (
                '$"..."' if top.kind == "dq" else _NAMES[top.kind])
            refused = f"stands inside {where}"
        if self.text:
            self.pieces.append("".join(self.text))
            self.text = []
        self.pieces.append(Slot(name, line, context, refused))

    def escape(self, i: int) -> int:
        """A backslash at ``i``: it and the character after it (never a placeholder)."""
        if isinstance(self.peek(i + 1), tuple):
            self.forced[i + 1] = "stands right after a backslash, which would take its quote"
            return i + 1
        return i + 2

    def dollar(self, i: int, where: str) -> int:
        nxt = self.peek(i + 1)
        if isinstance(nxt, tuple):
            self.forced[i + 1] = "stands right after a '$' (the shell would read ${...})"
            return i + 1
        if nxt == "(":
            if self.peek(i + 2) == "(":
                self.push("arith")
                return i + 3
            self.push("script", sub=True)
            return i + 2
        if nxt == "{":
            self.push("brace")
            return i + 2
        if nxt == "[":
            self.push("bracket")
            return i + 2
        if where in ("brace", "arith") and nxt in ("'", '"'):
            self.doubt("comes after quotes inside ${...} or $((...))")
        elif where != "dq" and nxt == "'":
            self.push("ansi")
            return i + 2
        elif where != "dq" and nxt == '"':
            self.push("dq", dollar=True)
            return i + 2
        return i + 1

    def end_word(self, f: _Frame) -> None:
        if f.sub and f.word == "case":
            self.doubt("comes after a 'case' inside $(...), whose ')' dagq cannot match")
        if f.word in ("[[", "]]"):
            f.test = f.word == "[["
        f.eval = f.eval or f.word == "eval"
        f.word = None

    def on_script(self, i: int, c: str) -> int:
        f = self.stack[-1]
        if c in " \t\n":
            self.end_word(f)
            f.word_start = True
            f.eval = f.eval and c != "\n"
            return i + 1
        if c == "#" and f.word_start:
            self.push("comment")
            return i + 1
        if c in ";&|()<>":
            return self.operator(f, i, c)
        start, f.word_start = f.word_start, False
        if c == "\\":
            if self.peek(i + 1) == "\n":  # a line continuation: as if neither were there
                f.word_start = start
                return i + 2
            f.word = None
            return self.escape(i)
        if c in "'\"`":
            f.word = None
            self.push({"'": "sq", '"': "dq", "`": "bq"}[c])
            return i + 1
        if c == "$":
            f.word = None
            return self.dollar(i, "script")
        if f.index:
            f.index += (c == "[") - (c == "]")
        elif c == "[" and f.word is not None and _NAME.fullmatch(f.word):
            f.index = 1
        if start:
            f.word = c
        elif f.word is not None:
            f.word += c
        return i + 1

    def operator(self, f: _Frame, i: int, c: str) -> int:
        self.end_word(f)
        start, f.word_start = f.word_start, True
        f.eval = f.eval and c in "<>"
        if c == "(":
            if start and self.peek(i + 1) == "(":
                self.push("arith")
                return i + 2
            f.depth += 1
        elif c == ")":
            if f.sub and f.depth == 0:
                self.stack.pop()
                outer = self.stack[-1]
                outer.word_start, outer.word = False, None
                return i + 1
            f.depth = max(0, f.depth - 1)
        elif c == "<" and self.peek(i + 1) == "<":
            self.doubt("comes after a here-document (<<)")
            return i + 2
        return i + 1

    def on_comment(self, i: int, c: str) -> int:
        if c == "\n":
            self.stack.pop()
            return i  # the newline ends the comment and is read by the script around it
        return i + 1

    def on_sq(self, i: int, c: str) -> int:
        if c == "'":
            self.stack.pop()
        return i + 1

    def on_dq(self, i: int, c: str) -> int:
        if c == "\\":
            return self.escape(i)
        if c == '"':
            self.stack.pop()
        elif c == "`":
            self.push("bq")
        elif c == "$":
            return self.dollar(i, "dq")
        return i + 1

    def on_ansi(self, i: int, c: str) -> int:
        if c == "\\":
            self.doubt("comes after a backslash inside $'...' (sh and bash read it apart)")
            return self.escape(i)
        if c == "'":
            self.stack.pop()
        return i + 1

    def on_bq(self, i: int, c: str) -> int:
        if c == "\\":
            return self.escape(i)
        if c == "`":
            self.stack.pop()
        return i + 1

    def on_brace(self, i: int, c: str) -> int:
        if c == "}":
            self.stack.pop()
        elif c in "'\"`\\":
            self.doubt("comes after quotes or a backslash inside ${...}")
        elif c == "$":
            return self.dollar(i, "brace")
        return i + 1

    def on_arith(self, i: int, c: str) -> int:
        f = self.stack[-1]
        if c == "(":
            f.depth += 1
        elif c == ")":
            if f.depth:
                f.depth -= 1
                return i + 1
            self.stack.pop()
            if self.peek(i + 1) == ")":
                return i + 2
            self.doubt("comes after a '$((' or '((' that is not closed by '))'")
        elif c in "'\"`\\":
            self.doubt("comes after quotes or a backslash inside $((...))")
        elif c == "$":
            return self.dollar(i, "arith")
        return i + 1

    def on_bracket(self, i: int, c: str) -> int:
        f = self.stack[-1]
        if c == "[":
            f.depth += 1
        elif c == "]":
            if not f.depth:
                self.stack.pop()
            f.depth = max(0, f.depth - 1)
        elif c in "'\"`\\":
            self.doubt("comes after quotes or a backslash inside $[...]")
        elif c == "$":
            return self.dollar(i, "arith")
        return i + 1

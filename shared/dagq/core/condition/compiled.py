"""The condition language: compile a task's ``condition``, check its references, evaluate it.

A condition is a small, Python-like expression over the outputs of a task's direct
dependencies, for example::

    inputs.train.mae < 0.1 and inputs["train-gnn"].mae < 0.1
    all(inputs["train-*"].loss < 0.01) and inputs.prep.status == "ok"
    count(inputs.*.passed) >= 3
    almost_all(inputs["worker-*"].loss < 0.1, 5)

Supported: comparisons (``== != < <= > >= in``, ``not in``, chained like Python),
``and``/``or``/``not``, parentheses, literals (numbers, strings, lists, ``True/False/None``
and ``true/false/null``), input references with nested fields and indexes, and the
aggregates ``all``, ``any``, ``count`` and ``almost_all(expr, N)`` whose body refers to
inputs selected by one glob pattern (``*``, ``?``, ``[...]``; ``inputs.*`` means every
input). Everything else (other calls, arithmetic, attribute access on anything but
inputs, comprehensions, lambdas, dunder names, slices, f-strings) is rejected by
:func:`compile_condition` with a :class:`~dagq.errors.ConditionError` that points at
the offending token. Expressions are limited to 4096 characters, 32 levels of nesting
and 1000 items per list.

Nothing here executes Python code: the expression is tokenized, parsed into a tree of
frozen dataclasses and walked. Evaluation never raises; see :meth:`Condition.evaluate`.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

from dagq.core.condition.evaluator import EvalFailure, Evaluator
from dagq.core.condition.nodes import Node
from dagq.core.condition.parser import parse
from dagq.core.model import OutputRef

__all__ = ["Condition", "cached_condition", "compile_condition"]


class Condition:
    """A compiled, valid condition. Immutable; safe to share and cache."""

    __slots__ = ("_name_order", "_pattern_order", "_root", "names", "patterns", "source")

    source: str
    """The expression as written."""
    names: frozenset[str]
    """Input names referenced directly (``inputs.NAME`` or ``inputs["NAME"]``)."""
    patterns: frozenset[str]
    """Glob patterns used by aggregates (``inputs.*`` counts as ``"*"``)."""

    def __init__(
        self, source: str, root: Node, names: tuple[str, ...], patterns: tuple[str, ...]
    ) -> None:
        self.source = source
        self._root = root
        self._name_order = names
        self._pattern_order = patterns
        self.names = frozenset(names)
        self.patterns = frozenset(patterns)

    def __repr__(self) -> str:
        return f"Condition({self.source!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Condition) and other.source == self.source

    def __hash__(self) -> int:
        return hash(self.source)

    def unknown_references(self, dependencies: Sequence[str]) -> list[str]:
        """Messages for names that are not in ``dependencies`` and patterns matching none.

        An empty list means every reference can be satisfied by a direct dependency.
        """
        deps = list(dependencies)
        known = set(deps)
        problems: list[str] = []
        for name in self._name_order:
            if name in known:
                continue
            close = difflib.get_close_matches(name, deps, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else "; add it to depends_on"
            problems.append(
                f"condition refers to input {name!r}, which is not a direct dependency{hint}"
            )
        for pattern in self._pattern_order:
            if not any(fnmatchcase(dep, pattern) for dep in deps):
                listed = ", ".join(repr(d) for d in deps) or "none"
                problems.append(
                    f"condition pattern {pattern!r} matches none of the dependencies ({listed})"
                )
        return problems

    def evaluate(
        self,
        inputs: Mapping[str, Any],
        resolve: Callable[[OutputRef], Any] | None = None,
    ) -> tuple[bool, str | None]:
        """Evaluate against the outputs of the dependencies; return ``(result, note)``.

        ``inputs`` maps a dependency name to its output (a JSON value) or to an
        :class:`OutputRef` that ``resolve`` turns into the value; only the references the
        evaluation actually reaches are resolved, each at most once per call. A missing
        input or field is null. A type error (such as ``null < 0.1``) or a failure of
        ``resolve`` makes the result false and the note says why. The note also reports
        aggregates that matched no input. ``note`` is None when nothing was noteworthy.
        Never raises.
        """
        evaluator = Evaluator(inputs, resolve)
        try:
            result = bool(evaluator.eval(self._root))
        except EvalFailure as exc:
            return False, exc.message
        except Exception as exc:  # the contract is "never raises": report odd values
            return False, f"evaluation failed: {type(exc).__name__}: {exc}"
        return result, "; ".join(evaluator.notes) or None


def compile_condition(expression: str) -> Condition:
    """Parse and check ``expression``; raise ConditionError pointing at the first problem."""
    root, names, patterns = parse(expression)
    return Condition(expression, root, names, patterns)


@functools.lru_cache(maxsize=4096)
def cached_condition(expression: str) -> Condition:
    """:func:`compile_condition` with a cache (errors are not cached; they raise again)."""
    return compile_condition(expression)

"""The condition language: ``lexer`` -> ``parser`` -> ``nodes`` -> ``evaluator``.

``compiled`` ties them together; use :func:`compile_condition` or the cached form.
"""

from dagq.core.condition.compiled import (
    Condition,
    cached_condition,
    compile_condition,
)

__all__ = [
    "Condition",
    "cached_condition",
    "compile_condition",
]

"""``--param K=V``: run parameters on the command line (submit, run, schedule add/update)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from dagq.core.model import WorkflowDef
from dagq.core.params import apply_params, parse_cli_value

F = TypeVar("F", bound=Callable[..., Any])


def param_option(f: F) -> F:
    """Add a repeatable ``--param K=V`` (collected as ``params``) to a command."""
    return click.option(
        "--param", "params", multiple=True, metavar="K=V",
        help="Run parameter (repeatable): typed by the definition's 'parameters', else "
             "JSON numbers/booleans/lists/objects or text. Tasks see it as {params.K}.",
    )(f)


def split_params(pairs: tuple[str, ...]) -> list[tuple[str, str]]:
    """``K=V`` texts as pairs; a usage error names one without ``=`` and a key given
    twice (which value was meant?)."""
    out: list[tuple[str, str]] = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise click.UsageError(f"--param {pair!r} must look like KEY=VALUE, e.g. "
                                   "--param epochs=5")
        if any(seen == name.strip() for seen, _ in out):
            raise click.UsageError(f"--param {name.strip()} is given more than once; give "
                                   "each parameter once")
        out.append((name.strip(), value))
    return out


def cli_params(defn: WorkflowDef, pairs: tuple[str, ...]) -> dict[str, Any]:
    """The values of ``--param`` options for ``defn`` (``DefinitionError`` if ill-typed)."""
    return {name: parse_cli_value(defn, name, text) for name, text in split_params(pairs)}


def with_params(defn: WorkflowDef, pairs: tuple[str, ...]) -> WorkflowDef:
    """``defn`` with the ``--param`` values applied and checked (before anything is written)."""
    return apply_params(defn, cli_params(defn, pairs))

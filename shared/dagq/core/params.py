"""Run parameters: declarations, values, and ``{params.NAME}`` in task ``kwargs``.

A definition may declare its parameters::

    parameters:
      epochs: {type: integer, default: 5}
      dataset: {type: string, description: "input table"}   # no default: required

and a run gets values from ``params`` (the file, ``--param K=V``, the HTTP ``params``
object, a parent workflow or a schedule). :func:`apply_params` merges the values of a
run over the declared defaults when it is submitted and refuses unknown, missing and
ill-typed ones, and values holding a NUL byte. At dispatch, :func:`render_kwargs` puts
the values into the task: ``{params.NAME}`` in ``cmd`` becomes the value quoted for the
place it stands in (outside quotes, inside ``'...'`` or inside ``"..."``, see
:mod:`dagq.core.shell_context`), so that ``/bin/sh`` reads it as that text and nothing
else; validation refuses ``{params.NAME}`` where no quoting can do that (inside
backquotes, ``${...}``, ``$((...))``, a comment, after a here-document...). In ``env``
values, ``cwd`` and ``args`` strings it becomes the plain text, and an ``args`` value
that is exactly ``"{params.NAME}"`` the JSON value itself. ``{{params.NAME}}`` stands
for the literal text ``{params.NAME}``. Pure: no I/O.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from dagq.core.model import WorkflowDef
from dagq.core.rules import MAX_NESTING, describe, json_problems
from dagq.core.shell_context import PLACEHOLDER_RE, Piece, Slot, quote, scan
from dagq.errors import DefinitionError, Problem

TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "array": (list, tuple), "object": (dict,),
}
"""Declarable parameter types (JSON types) and the Python types of their values."""
SPEC_KEYS = ("type", "default", "required", "description")
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REF_RE = PLACEHOLDER_RE
_WHOLE_RE = re.compile(r"\{params\.([A-Za-z_]\w*)\}")

Found = Iterator[tuple[str, str]]
"""``(message, field path)`` pairs."""


def type_ok(kind: str, value: object) -> bool:
    """True if ``value`` is of the declared parameter type ``kind``."""
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False
    return isinstance(value, TYPES.get(kind, ()))


def is_required(spec: Mapping[str, Any]) -> bool:
    """A parameter is required unless it has a default or says ``required: false``."""
    return bool(spec.get("required", "default" not in spec))


def declaration_problems(parameters: object) -> Found:
    """Problems of a ``parameters`` mapping (paths start with ``parameters``)."""
    if not isinstance(parameters, Mapping):
        yield f"parameters must be a mapping of names to {{type, default}}, got " \
              f"{describe(parameters)}", "parameters"
        return
    for name, spec in parameters.items():
        where = f"parameters.{name}"
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            yield (f"parameter name {name!r} must be a word of letters, digits and '_' "
                   "(it is written {params.NAME})"), "parameters"
            continue
        if not isinstance(spec, Mapping):
            yield f"parameter {name!r} must be a mapping like {{type: string}}, got " \
                  f"{describe(spec)}", where
            continue
        for key in spec:
            if key not in SPEC_KEYS:
                close = difflib.get_close_matches(str(key), SPEC_KEYS, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                yield (f"parameter {name!r} has unknown key {key!r}; {hint}"
                       f"allowed: {', '.join(SPEC_KEYS)}"), f"{where}.{key}"
        kind = spec.get("type", "string")
        if kind not in TYPES:
            close = difflib.get_close_matches(str(kind), list(TYPES), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            yield (f"parameter {name!r} has type {describe(kind)}; use one of "
                   f"{', '.join(TYPES)}{hint}"), f"{where}.type"
        elif "default" in spec and not type_ok(kind, spec["default"]):
            yield (f"the default of parameter {name!r} must be of type {kind}, got "
                   f"{describe(spec['default'])}"), f"{where}.default"
        if not isinstance(spec.get("required", False), bool):
            yield f"parameter {name!r}: required must be true or false", f"{where}.required"


def value_problems(defn: WorkflowDef) -> Found:
    """Unknown or ill-typed values in ``defn.params`` (when parameters are declared)."""
    declared, params = defn.parameters, defn.params
    if not declared or not isinstance(declared, Mapping) or not isinstance(params, Mapping):
        return
    for name, value in params.items():
        spec = declared.get(name)
        if not isinstance(spec, Mapping):
            close = difflib.get_close_matches(str(name), [str(n) for n in declared], n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            yield (f"unknown parameter {name!r}; {hint}the workflow declares "
                   f"{', '.join(map(str, declared))}"), f"params.{name}"
        elif spec.get("type", "string") in TYPES and not type_ok(
                spec.get("type", "string"), value):
            yield (f"parameter {name!r} must be of type {spec.get('type', 'string')}, got "
                   f"{describe(value)}"), f"params.{name}"


def reference_problems(defn: WorkflowDef, kwargs: Mapping[str, Any]) -> Found:
    """``{params.NAME}`` references in ``kwargs`` naming no declared or given parameter
    (paths are relative to ``kwargs``)."""
    known = set(defn.params) if isinstance(defn.params, Mapping) else set()
    if isinstance(defn.parameters, Mapping):
        known |= {str(n) for n in defn.parameters}
    for where, text in _strings(kwargs, "kwargs"):
        for match in _REF_RE.finditer(text):
            name = match.group(2)
            if name is not None and name not in known:
                close = difflib.get_close_matches(name, sorted(known), n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                yield (f"{{params.{name}}} names no parameter; {hint}declare it under "
                       "'parameters' (or give it in 'params'); write {{params." + name
                       + "}} for the literal text"), where


def nul_problems(params: object) -> Found:
    """Parameter values (or keys within them) holding a NUL byte: no command line,
    environment variable or path can carry one, so they are refused at submit."""
    if not isinstance(params, Mapping):
        return
    for name, value in params.items():
        if isinstance(name, str) and "\x00" in name:
            yield f"parameter name {name!r} contains a NUL byte", "params"
            continue
        bad = _nul_at(value)
        if bad is not None:
            inner = f" (at {bad})".replace("\x00", "\\x00") if bad else ""
            yield (f"parameter {name!r} contains a NUL byte{inner}, which no command line, "
                   "environment variable or path can hold"), f"params.{name}"


def _nul_at(value: Any) -> str | None:
    """Where in ``value`` a text or a key holds a NUL byte ("" for ``value`` itself)."""
    stack = [(value, "", 0)]
    while stack:
        item, at, level = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return at
        elif level >= MAX_NESTING:
            continue
        elif isinstance(item, Mapping):
            for k, v in item.items():
                where = f"{at}.{k}" if at else str(k)
                if isinstance(k, str) and "\x00" in k:
                    return where
                stack.append((v, where, level + 1))
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{at}[{i}]", level + 1) for i, v in enumerate(item))
    return None


def cmd_problems(cmd: object) -> Iterator[str]:
    """Why each ``{params.NAME}`` of a ``cmd`` template that no quoting can make plain
    text for ``/bin/sh`` is refused (nothing for one that is fine everywhere)."""
    if not isinstance(cmd, str) or "{params." not in cmd:
        return
    many = "\n" in cmd.strip("\n")
    for piece in scan(cmd):
        if isinstance(piece, Slot) and piece.refused:
            yield _refusal(piece, many)


def _refusal(slot: Slot, many: bool) -> str:
    where = f" on line {slot.line} of cmd" if many else ""
    ref = "{params." + slot.name + "}"
    return (f"{ref}{where} {slot.refused}, where dagq cannot write a value that the shell "
            f"is sure to read as plain text; give it through env instead, e.g. env: "
            f"{{P: \"{ref}\"}} and \"$P\" in cmd")


def definition_problems(defn: WorkflowDef, skip: Sequence[int] = b"") -> Iterator[
        tuple[str, int | None, str]]:
    """Every parameter problem of ``defn`` as ``(message, task index or None, field)``
    (tasks flagged in ``skip`` are known to hold no ``{params.NAME}`` reference)."""
    for message, where in declaration_problems(defn.parameters):
        yield message, None, where
    if isinstance(defn.parameters, Mapping):
        for where, message in json_problems(defn.parameters, "parameters"):
            yield message, None, where
    for message, where in value_problems(defn):
        yield message, None, where
    for message, where in nul_problems(defn.params):
        yield message, None, where
    tasks = defn.tasks if isinstance(defn.tasks, list | tuple) else ()
    for i, task in enumerate(tasks):
        if i < len(skip) and skip[i]:
            continue
        kwargs = getattr(task, "kwargs", None)
        if isinstance(kwargs, Mapping):
            for message, where in reference_problems(defn, kwargs):
                yield message, i, where
            for message in cmd_problems(kwargs.get("cmd")):
                yield message, i, "kwargs.cmd"


def apply_params(defn: WorkflowDef, given: Mapping[str, Any] | None = None) -> WorkflowDef:
    """``defn`` with ``given`` over its ``params`` and declared defaults filled in;
    ``DefinitionError`` naming every unknown, missing or ill-typed parameter."""
    params = {**dict(defn.params), **dict(given or {})}
    declared = defn.parameters if isinstance(defn.parameters, Mapping) else {}
    for name, spec in declared.items():
        if name not in params and isinstance(spec, Mapping) and "default" in spec:
            params[name] = spec["default"]
    out = replace(defn, params=params) if params != dict(defn.params) else defn
    problems = [Problem(m, field=f) for m, f in value_problems(out)]
    problems += [Problem(m, field=f) for m, f in nul_problems(params)]
    for name, spec in declared.items():
        if name not in params and isinstance(spec, Mapping) and is_required(spec):
            kind = spec.get("type", "string")
            problems.append(Problem(f"missing required parameter {name!r} ({kind}); give "
                                    f"it with --param {name}=VALUE or in params",
                                    field=f"params.{name}"))
    if problems:
        raise DefinitionError(problems)
    return out


def parse_cli_value(defn: WorkflowDef, name: str, text: str) -> Any:
    """The value of ``--param NAME=TEXT``: typed by the declaration when there is one,
    else JSON when ``TEXT`` is a JSON number, boolean, array or object, else the text."""
    spec = defn.parameters.get(name) if isinstance(defn.parameters, Mapping) else None
    kind = spec.get("type", "string") if isinstance(spec, Mapping) else None
    if kind == "string":
        return text
    try:
        value = json.loads(text)
    except ValueError:
        value = text
    if kind is None:
        return text if isinstance(value, str) or value is None else value
    if not type_ok(kind, value):
        raise DefinitionError([Problem(f"--param {name}={text!r}: parameter {name!r} is of "
                                       f"type {kind}", field=f"params.{name}")])
    return value


def render_kwargs(kwargs: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` with ``{params.NAME}`` replaced (see the module docstring);
    ``ValueError`` for a placeholder in ``cmd`` that validation refuses, or a value with
    a NUL byte for ``cmd``, ``env`` or ``cwd`` (a definition stored before those checks)."""
    out = dict(kwargs)
    if isinstance(out.get("cmd"), str):
        out["cmd"] = render_cmd(out["cmd"], params)
    env = out.get("env")
    if isinstance(env, Mapping):
        out["env"] = {k: _process_text(v, params, f"env.{k}") if isinstance(v, str) else v
                      for k, v in env.items()}
    if isinstance(out.get("cwd"), str):
        out["cwd"] = _process_text(out["cwd"], params, "cwd")
    args = out.get("args")
    if isinstance(args, Mapping):
        out["args"] = {k: _render_value(v, params) for k, v in args.items()}
    return out


def render_cmd(cmd: str, params: Mapping[str, Any]) -> str:
    """``cmd`` with each ``{params.NAME}`` written for the place it stands in, so that
    ``/bin/sh -c`` reads it as the value's text (``ValueError`` where it cannot)."""
    if "{params." not in cmd:
        return cmd
    present = frozenset(m.group(2) for m in _REF_RE.finditer(cmd)
                        if m.group(2) is not None and m.group(2) in params)
    many = "\n" in cmd.strip("\n")
    out = []
    for piece in _scanned(cmd, present):
        if isinstance(piece, str):
            out.append(piece)
            continue
        if piece.refused:
            raise ValueError(f"kwargs.cmd: {_refusal(piece, many)}")
        out.append(quote(_text(params, piece.name, "cmd"), piece.context))
    return "".join(out)


@functools.lru_cache(maxsize=512)
def _scanned(cmd: str, present: frozenset[str]) -> tuple[Piece, ...]:
    """``scan(cmd, present)``, kept per template: every instance of a mapped task (and
    every dispatch of a task with parameters) has the same command template."""
    return tuple(scan(cmd, present))


def _process_text(text: str, params: Mapping[str, Any], field: str) -> str:
    done = _substitute(text, params)
    if "\x00" in done and "\x00" not in text:
        raise ValueError(f"kwargs.{field}: a parameter value put there contains a NUL byte")
    return done


def _text(params: Mapping[str, Any], name: str, field: str) -> str:
    value = params[name]
    shown = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    if "\x00" in shown:
        raise ValueError(f"kwargs.{field}: parameter {name!r} contains a NUL byte")
    return shown


def _render_value(value: Any, params: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        whole = _WHOLE_RE.fullmatch(value)
        if whole and whole.group(1) in params:
            return params[whole.group(1)]
        return _substitute(value, params)
    if isinstance(value, list | tuple):
        return [_render_value(v, params) for v in value]
    if isinstance(value, Mapping):
        return {k: _render_value(v, params) for k, v in value.items()}
    return value


def _substitute(text: str, params: Mapping[str, Any]) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return "{params." + match.group(1) + "}"
        name = match.group(2)
        if name not in params:
            return match.group(0)
        value = params[name]
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))

    return _REF_RE.sub(one, text)


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    stack = [(value, where, 0)]
    while stack:
        item, at, level = stack.pop()
        if isinstance(item, str):
            yield at, item
        elif level >= MAX_NESTING:
            continue  # too deep (or cyclic): reported by the JSON checks
        elif isinstance(item, Mapping):
            stack.extend((v, f"{at}.{k}", level + 1) for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{at}[{i}]", level + 1) for i, v in enumerate(item))

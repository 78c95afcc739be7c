"""Builds the definition JSON Schema from its hand-written base and the task kinds.

The fields of workflows and tasks are described in ``base.json``; everything about task
kinds (which ``kwargs`` keys each kind takes, what selects a kind, ``kind:`` values) is
generated from ``dagq.core.kinds``, the declarations the validator checks against, so
editor and validator cannot drift. The shipped ``workflow-definition.schema.json`` is
this output (a test keeps it so); ``dagq schema --write FILE`` regenerates it.

``errorMessage`` and ``markdownDescription`` are VS Code's JSON schema extensions, shown
by its JSON editor and the YAML language server (see microsoft/vscode
``src/vs/base/common/jsonSchema.ts``); other validators ignore them.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib.resources import files
from typing import Any

from dagq.core.kinds import (
    EXTENSION_PREFIX,
    NOOP,
    WORKFLOW,
    WRITABLE,
    TaskKind,
    custom_kinds,
    marked_kinds,
)

SCHEMA_ID = "urn:dagq:schema:workflow-definition:1"
"""The schema's ``$id``. A URN rather than a URL: the file ships in the package and
``dagq schema [--write FILE]`` prints it; editors are pointed at a local copy."""
NOTHING_TO_RUN = ("This task runs nothing: give kwargs.cmd (a shell command), kwargs.call "
                  "(a Python function) or workflow (a child workflow), or write 'kind: noop' "
                  "for a join that only waits for its dependencies.")


@cache
def _base_text() -> str:
    return files("dagq.core.schema").joinpath("base.json").read_text(encoding="utf-8")


def build_schema() -> dict[str, Any]:
    """The full schema: the base with the task kinds (built-in and registered) filled in."""
    schema: dict[str, Any] = json.loads(_base_text())
    schema = {"$schema": schema.pop("$schema"), "$id": SCHEMA_ID, **schema}
    task = schema["$defs"]["task"]
    kinds = marked_kinds()
    custom_names = [k.name for k in custom_kinds()]
    props = task["properties"]
    props["kind"] = {
        "description": "What the task is. Usually inferred (kwargs.cmd: shell, kwargs.call: "
                       "function, workflow: workflow); write 'noop' for a join that runs "
                       "nothing" + (", or a custom processor's kind" if custom_names else ""),
        "enum": [*WRITABLE, *custom_names],
    }
    props["kwargs"] = _kwargs_property(kinds)
    task["allOf"].extend(_kind_rules(kinds, custom_kinds()))
    schema["$defs"]["kinds"] = {k.name: _kwargs_of(k) for k in (*kinds, *custom_kinds())
                                if k.keys}
    return schema


def schema_text() -> str:
    """:func:`build_schema` as the text of the shipped file (stable, two-space indent)."""
    return json.dumps(build_schema(), indent=2, ensure_ascii=False) + "\n"


def _kwargs_property(kinds: tuple[TaskKind, ...]) -> dict[str, Any]:
    known: dict[str, Any] = {}
    for kind in kinds:
        for key, fragment in kind.keys.items():
            known.setdefault(key, copy.deepcopy(dict(fragment)))
    return {
        "description": "What the worker needs to run the task; the keys depend on the kind: "
                       + "; ".join(f"{k.name} ({k.marker}): {', '.join(k.keys)}"
                                   for k in kinds)
                       + f". Keys starting with {EXTENSION_PREFIX} are passed through unchecked.",
        "type": "object",
        "default": {},
        "properties": known,
    }


def _kwargs_of(kind: TaskKind) -> dict[str, Any]:
    """The ``kwargs`` object of ``kind``: its keys, ``x_`` extensions, nothing else."""
    return {
        "type": "object",
        "properties": {key: copy.deepcopy(dict(f)) for key, f in kind.keys.items()},
        "patternProperties": {f"^{EXTENSION_PREFIX}": {}},
        "additionalProperties": False,
        "errorMessage": {"additionalProperties":
                         f"{kind.name} tasks take {', '.join(kind.keys)} (or x_... keys)"},
    }


def _kind_rules(kinds: tuple[TaskKind, ...], custom: tuple[TaskKind, ...]) -> list[Any]:
    rules: list[Any] = []
    for kind in kinds:
        rules.append({
            "if": {"required": ["kwargs"],
                   "properties": {"kwargs": {"type": "object", "required": [kind.marker]}}},
            "then": {"properties": {"kwargs": {"$ref": f"#/$defs/kinds/{kind.name}"},
                                    "kind": {"const": kind.name}}},
        })
        rules.append({"if": _kind_is(kind.name), "then": {
            "required": ["kwargs"],
            "properties": {"kwargs": {"required": [kind.marker]}},
            "errorMessage": f"a {kind.name} task needs kwargs.{kind.marker}"}})
    rules.append({"if": _kind_is(WORKFLOW.name), "then": {"required": ["workflow"]}})
    rules.append({"if": {"required": ["workflow"]}, "then": {"properties": {"kwargs": {
        "propertyNames": {"pattern": f"^{EXTENSION_PREFIX}"},
        "errorMessage": "a task with 'workflow' runs the child workflow; kwargs is unused"}}}})
    for kind in custom:
        if kind.marker is None and kind.keys:
            rules.append({"if": _kind_is(kind.name), "then": {
                "properties": {"kwargs": {"$ref": f"#/$defs/kinds/{kind.name}"}}}})
    rules.append({"if": _kind_is(NOOP.name),
                  "then": {"properties": {"kwargs": {"type": "object", "propertyNames": {
                      "pattern": f"^{EXTENSION_PREFIX}"}}}}})
    selected: list[Any] = [{"required": ["workflow"]},
                           {"required": ["merge"], "properties": {"merge": {"const": True}}},
                           {"required": ["kind"]}]
    selected += [{"required": ["kwargs"],
                  "properties": {"kwargs": {"type": "object", "required": [k.marker]}}}
                 for k in kinds]
    rules.append({"anyOf": selected, "errorMessage": NOTHING_TO_RUN})
    return rules


def _kind_is(name: str) -> dict[str, Any]:
    return {"required": ["kind"], "properties": {"kind": {"const": name}}}

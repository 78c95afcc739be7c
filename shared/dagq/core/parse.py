"""Workflow definitions from YAML or JSON, and their canonical forms.

Loading reports every problem at once in a ``DefinitionError``: the structure (unknown
or missing fields, duplicate keys) is checked here, everything else by
``dagq.core.validate``. For YAML every problem carries the line (and column) of the
field it is about; malformed text gives one problem with its position.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import MISSING, fields
from operator import attrgetter
from typing import Any, Literal

import yaml
from yaml.nodes import Node

from dagq.core.hardening import printable
from dagq.core.model import DEFAULT_QUEUE, SubWorkflow, TaskDef, WorkflowDef
from dagq.core.rules import describe, join_path
from dagq.core.transforms import nested_problem
from dagq.core.validate import MAX_SUBWORKFLOW_DEPTH, SourceMap, check
from dagq.core.yaml_source import (
    compose_quietly,
    duplicate_keys,
    position,
    read_json,
    read_yaml,
    with_lines,
)
from dagq.errors import DefinitionError, Problem

WORKFLOW_FIELDS = ("$schema", "name", "description", "default_queue", "default_task_timeout_s",
                   "max_parallelism", "result_policy", "params", "parameters", "cache",
                   "concurrency", "priority", "on_finish", "on_failure", "tasks")
TASK_FIELDS = ("name", "kwargs", "depends_on", "queue", "dep_policy", "condition", "num_retries",
               "retry_backoff_s", "retry_backoff_max_s", "timeout_s", "delay_s", "workflow",
               "params", "merge", "kind", "map", "cache", "concurrency", "priority")

_NULL_MEANS_DEFAULT = {"description", "default_task_timeout_s", "max_parallelism", "queue",
                       "condition", "timeout_s", "kind", "map", "cache", "concurrency",
                       "priority", "on_finish", "on_failure"}
_PLAIN_TASK_FIELDS = ("kwargs", "queue", "dep_policy", "condition", "num_retries",
                      "retry_backoff_s", "retry_backoff_max_s", "timeout_s", "delay_s", "merge",
                      "kind", "map", "cache", "concurrency", "priority")
_PLAIN_FIELDS = frozenset(("name", "depends_on", *_PLAIN_TASK_FIELDS))
_SHORT_FIELDS = frozenset(("name", "kwargs", "depends_on"))
_NO_KWARGS: Any = object()
_TASK_DEFAULTS = {f.name: f.default for f in fields(TaskDef) if f.default is not MISSING}
_OPTIONAL = ("queue", "dep_policy", "condition", "num_retries", "retry_backoff_s",
             "retry_backoff_max_s", "timeout_s", "delay_s", "kind", "map", "cache",
             "concurrency", "priority")
"""Task fields written by ``definition_to_dict`` only when they differ from the default."""
_OPTIONAL_DEFAULTS = tuple(_TASK_DEFAULTS[key] for key in _OPTIONAL)
_optional_of = attrgetter(*_OPTIONAL)
_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load_definition(text: str | bytes, *, source: str | None = None,
                    fmt: Literal["yaml", "json"] | None = None) -> WorkflowDef:
    """Parse and validate a definition; raise ``DefinitionError`` listing every problem.

    ``fmt`` None detects the format: JSON if the text is a JSON object, else YAML. A
    top-level ``$schema`` key is accepted and ignored.
    """
    if isinstance(text, bytes):
        raw = text
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line, column = position(raw[:exc.start].decode("utf-8", "replace"), None)
            raise DefinitionError([Problem(f"the file is not UTF-8 text ({exc.reason})",
                                           line=line, column=column)], source) from None
    text = text.removeprefix("\ufeff")
    root: Node | None = None
    problems: list[Problem] = []
    json_data = None
    if fmt == "json" or (fmt is None and text.lstrip().startswith("{")):
        json_data = read_json(text, source, strict=fmt == "json")
    if json_data is None:
        root, data, problems = read_yaml(text, source)
    else:
        data, duplicates = json_data
        if duplicates:
            root = compose_quietly(text)
            problems = (duplicate_keys(root) if root is not None
                        else [Problem("an object has the same key twice; remove one")])
    defn, problems = _build_checked(data, problems)
    if problems:
        if root is None and json_data is not None:
            root = compose_quietly(text)
        raise DefinitionError([printable(p) for p in with_lines(problems, root)], source)
    return defn


def definition_from_dict(data: Mapping[str, Any], *, source: str | None = None) -> WorkflowDef:
    """Build and validate a definition from plain data; raise ``DefinitionError`` if invalid."""
    defn, problems = _build_checked(data, [])
    if problems:
        raise DefinitionError([printable(p) for p in problems], source)
    return defn


def _build_checked(data: object, problems: list[Problem]) -> tuple[WorkflowDef, list[Problem]]:
    if not isinstance(data, Mapping):
        what = "empty" if data is None else f"{describe(data)}, not a mapping"
        problems.append(Problem(f"the definition is {what}; it needs at least 'name' and "
                                "'tasks'"))
        return WorkflowDef(name="", tasks=()), problems
    defn, source = _build(data, "", 0, problems)
    problems.extend(check(defn, source))
    return defn, problems


def _build(data: Mapping[Any, Any], prefix: str, depth: int,
           problems: list[Problem]) -> tuple[WorkflowDef, SourceMap]:
    task_index: list[int] = []
    source = SourceMap(task_index=task_index)
    _unknown_fields(data, WORKFLOW_FIELDS, prefix, None, problems)
    if not isinstance(data.get("$schema", ""), str):
        problems.append(Problem("$schema must be a string (the URL or path of the schema)",
                                field=prefix + "$schema"))
    args: dict[str, Any] = {}
    for key in WORKFLOW_FIELDS[1:-1]:
        if key in data and not (data[key] is None and key in _NULL_MEANS_DEFAULT):
            args[key] = data[key]
    if "name" not in data:
        problems.append(Problem("missing required field 'name'", field=prefix + "name"))
        source.skip.add((-1, "name"))
        args["name"] = ""
    tasks: list[TaskDef] = []
    raw_tasks = data.get("tasks")
    if not isinstance(raw_tasks, list):
        message = ("missing required field 'tasks'" if "tasks" not in data else
                   f"tasks must be a list of tasks, got {describe(raw_tasks)}")
        problems.append(Problem(message, field=prefix + "tasks"))
        source.skip.add((-1, "tasks"))
        raw_tasks = []
    for i, item in enumerate(raw_tasks):
        if type(item) is not dict and not isinstance(item, Mapping):
            problems.append(Problem(f"each task must be a mapping with at least a name, got "
                                    f"{describe(item)}", field=f"{prefix}tasks[{i}]"))
            continue
        task_index.append(i)
        tasks.append(_plain_task(item) or _build_task(item, f"{prefix}tasks[{i}]", len(tasks),
                                                      source, depth, problems))
    return WorkflowDef(tasks=tuple(tasks), **args), source


def _plain_task(item: Mapping[Any, Any]) -> TaskDef | None:
    """The task of ``item`` when it has a name and only fields taken as they are (no
    sub-workflow), else None for ``_build_task``: one set test instead of one per field."""
    if type(item) is not dict or "name" not in item:
        return None
    if _SHORT_FIELDS.issuperset(item):  # most tasks: name, kwargs, depends_on
        kwargs = item.get("kwargs", _NO_KWARGS)
        deps = item.get("depends_on", ())
        if type(deps) is list:
            deps = tuple(deps)
        elif type(deps) is str:
            deps = (deps,)
        return TaskDef(item["name"], {} if kwargs is _NO_KWARGS else kwargs, deps)
    if not _PLAIN_FIELDS.issuperset(item):
        return None
    args = {k: v for k, v in item.items() if v is not None or k not in _NULL_MEANS_DEFAULT}
    deps = args.get("depends_on")
    if deps is not None:
        args["depends_on"] = (deps,) if isinstance(deps, str) else (
            tuple(deps) if isinstance(deps, list) else deps)
    return TaskDef(**args)


def _build_task(item: Mapping[Any, Any], where: str, index: int, source: SourceMap,
                depth: int, problems: list[Problem]) -> TaskDef:
    name = item.get("name")
    label = name if isinstance(name, str) and name else None
    _unknown_fields(item, TASK_FIELDS, where + ".", label, problems)
    args: dict[str, Any] = {key: item[key] for key in _PLAIN_TASK_FIELDS
                            if key in item and not (item[key] is None
                                                    and key in _NULL_MEANS_DEFAULT)}
    if "name" not in item:
        problems.append(Problem("every task needs a name", field=where + ".name"))
        source.skip.add((index, "name"))
    args["name"] = item.get("name", "")
    if "depends_on" in item:
        deps = item["depends_on"]
        args["depends_on"] = (deps,) if isinstance(deps, str) else (
            tuple(deps) if isinstance(deps, list) else deps)
    if "workflow" in item:
        child, params = item["workflow"], item.get("params", {})
        if isinstance(child, str):
            args["workflow"] = SubWorkflow(path=child, params=params)
        elif not isinstance(child, Mapping):
            source.skip.add((index, "kind"))  # reported here; not also "runs nothing"
            problems.append(Problem(f"workflow must be a file path or an inline workflow "
                                    f"definition, got {describe(child)}", task=label,
                                    field=where + ".workflow"))
        elif depth + 1 >= MAX_SUBWORKFLOW_DEPTH:
            source.skip.add((index, "kind"))
            problems.append(Problem(f"sub-workflows are nested more than "
                                    f"{MAX_SUBWORKFLOW_DEPTH} deep", task=label,
                                    field=where + ".workflow"))
        else:
            inner: list[Problem] = []
            defn, child_source = _build(child, where + ".workflow.", depth + 1, inner)
            problems.extend(nested_problem(p, label) for p in inner)
            source.children[index] = child_source
            args["workflow"] = SubWorkflow(definition=defn, params=params)
    elif "params" in item:
        problems.append(Problem("params are the parameters of a child workflow; add "
                                "'workflow' or remove 'params'", task=label,
                                field=where + ".params"))
    return TaskDef(**args)


def _unknown_fields(data: Mapping[Any, Any], allowed: tuple[str, ...], prefix: str,
                    task: str | None, problems: list[Problem]) -> None:
    for key in data:
        if key in allowed:
            continue
        close = difflib.get_close_matches(str(key), allowed, n=1)
        hint = (f"; did you mean {close[0]!r}?" if close
                else f"; allowed fields: {', '.join(allowed)}")
        where = join_path(prefix.rstrip("."), key) if isinstance(key, str) else prefix.rstrip(".")
        problems.append(Problem(f"unknown field {key!r}{hint}", task=task, field=where))


# -- canonical forms ---------------------------------------------------------------------

def definition_to_dict(defn: WorkflowDef, *, factories: bool = False) -> dict[str, Any]:
    """Plain data for ``defn``: fields at their default are left out; loads back equal.

    Raises ``ValueError`` for a sub-workflow given by a Python factory (it has no
    YAML/JSON form; call the factory first) unless ``factories`` is true, which writes
    ``workflow: {factory: "module:function"}`` (for hashing: the parser never accepts it,
    so text submitted over HTTP cannot make the coordinator import code). For hashing,
    ``kwargs`` and ``depends_on`` are the task's own objects, to be encoded, not edited.
    """
    out: dict[str, Any] = {"name": defn.name}
    if defn.description is not None:
        out["description"] = defn.description
    if defn.default_queue != DEFAULT_QUEUE:
        out["default_queue"] = defn.default_queue
    if defn.default_task_timeout_s is not None:
        out["default_task_timeout_s"] = _number(defn.default_task_timeout_s)
    if defn.max_parallelism is not None:
        out["max_parallelism"] = defn.max_parallelism
    if defn.result_policy != "all_sinks_succeed":
        out["result_policy"] = defn.result_policy
    if defn.params:
        out["params"] = _plain(defn.params)
    if defn.parameters:
        out["parameters"] = _plain(defn.parameters)
    if defn.cache is not None:
        out["cache"] = _plain(defn.cache)
    if defn.concurrency is not None:
        out["concurrency"] = _plain(defn.concurrency)
    if defn.priority is not None:
        out["priority"] = defn.priority
    for hook in ("on_finish", "on_failure"):
        if getattr(defn, hook) is not None:
            out[hook] = _plain(getattr(defn, hook))
    out["tasks"] = [_task_to_dict(t, factories) for t in defn.tasks]
    return out


def _task_to_dict(task: TaskDef, factories: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"name": task.name}
    if task.merge:
        out["merge"] = True
    if task.kwargs:
        out["kwargs"] = task.kwargs if factories else _plain(task.kwargs)
    if task.depends_on:
        out["depends_on"] = task.depends_on if factories else list(task.depends_on)
    row = _optional_of(task)
    if row != _OPTIONAL_DEFAULTS:  # the common case is one comparison, not nine
        for key, value, default in zip(_OPTIONAL, row, _OPTIONAL_DEFAULTS, strict=True):
            if value != default:
                out[key] = _number(value)
    sub = task.workflow
    if sub is not None:
        if sub.factory is not None and factories:
            out["workflow"] = {"factory": sub.factory}
        elif sub.factory is not None:
            raise ValueError(f"task {task.name!r} runs a sub-workflow made by the factory "
                             f"{sub.factory!r}, which has no YAML/JSON form; call it first")
        else:
            out["workflow"] = (definition_to_dict(sub.definition, factories=factories)
                               if sub.definition else sub.path)
        if sub.params:
            out["params"] = _plain(sub.params)
    return out


def _number(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """A copy of ``value`` made of dicts and lists only."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _SCALAR_TYPES else _plain(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [v if type(v) in _SCALAR_TYPES else _plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def canonical_json(defn: WorkflowDef) -> str:
    """Compact JSON of :func:`definition_to_dict` with sorted keys (stable across runs)."""
    return json.dumps(definition_to_dict(defn, factories=True), sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                      default=_as_dict)


def _as_dict(value: object) -> dict[Any, Any]:
    """A mapping that is not a dict, for the JSON encoder (which encodes only dicts)."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def definition_hash(defn: WorkflowDef) -> str:
    """SHA-256 (hex) of :func:`canonical_json`: equal definitions hash equal."""
    return hashlib.sha256(canonical_json(defn).encode("utf-8")).hexdigest()


class _FlowList(list[Any]):
    """A list written in flow style (``[a, b]``)."""


class _YamlDumper(_Dumper):  # type: ignore[valid-type,misc]
    """Block style, with flow lists for depends_on and literal blocks for multi-line text."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _represent_flow(dumper: yaml.SafeDumper, value: _FlowList) -> yaml.SequenceNode:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=True)


_YamlDumper.add_representer(str, _represent_str)
_YamlDumper.add_representer(_FlowList, _represent_flow)


def dump_yaml(defn: WorkflowDef) -> str:
    """``defn`` as readable YAML that :func:`load_definition` reads back equal."""
    data = definition_to_dict(defn)
    _flow_dependencies(data)
    return str(yaml.dump(data, Dumper=_YamlDumper, sort_keys=False, allow_unicode=True,
                         default_flow_style=False, width=100))


def _flow_dependencies(data: dict[str, Any]) -> None:
    for task in data["tasks"]:
        if "depends_on" in task:
            task["depends_on"] = _FlowList(task["depends_on"])
        if isinstance(task.get("workflow"), dict):
            _flow_dependencies(task["workflow"])

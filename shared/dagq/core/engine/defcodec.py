"""Compact JSON form of a ``WorkflowDef`` for the state blob (columnar, defaults omitted).

Task fields other than ``name``, ``kwargs`` and ``depends_on`` are stored sparsely: only
tasks whose value differs from the default appear. Dependencies are stored as task
indexes. ``def_from_json(def_to_json(d)) == d`` for every definition whose mappings hold
JSON values (tuples inside ``kwargs`` or ``params`` come back as lists).
"""

from __future__ import annotations

from dataclasses import fields
from operator import attrgetter
from typing import Any

from dagq.core.model import SubWorkflow, TaskDef, WorkflowDef

_TASK_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in fields(TaskDef)
    if f.name not in ("name", "kwargs", "depends_on", "workflow")
}
_WF_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in fields(WorkflowDef)
    if f.name not in ("name", "tasks", "params", "parameters")
}


_EXTRA_FIELDS = (*_TASK_DEFAULTS, "workflow")
_DEFAULT_ROW = (*_TASK_DEFAULTS.values(), None)
_extra_of = attrgetter(*_EXTRA_FIELDS)


def def_to_json(defn: WorkflowDef) -> dict[str, Any]:
    """The definition as a JSON-ready dict."""
    tasks = defn.tasks
    index = {t.name: i for i, t in enumerate(tasks)}
    out: dict[str, Any] = {"name": defn.name}
    for key, default in _WF_DEFAULTS.items():
        value = getattr(defn, key)
        if value != default:
            out[key] = value
    if defn.params:
        out["params"] = dict(defn.params)
    if defn.parameters:
        out["parameters"] = dict(defn.parameters)
    out["names"] = [t.name for t in tasks]
    out["kwargs"] = sparse([t.kwargs if type(t.kwargs) is dict else dict(t.kwargs)
                            for t in tasks], {})
    out["deps"] = [[index[d] for d in t.depends_on] for t in tasks]
    extra: dict[str, dict[str, list[Any]]] = {}
    for i, t in enumerate(tasks):
        row = _extra_of(t)
        if row == _DEFAULT_ROW:
            continue  # the common case: one comparison instead of one per field
        for key, value, default in zip(_EXTRA_FIELDS, row, _DEFAULT_ROW, strict=True):
            if value != default:
                col = extra.setdefault(key, {"i": [], "v": []})
                col["i"].append(i)
                col["v"].append(_sub_to_json(value) if key == "workflow" else value)
    if extra:
        out["fields"] = extra
    return out


def def_from_json(data: dict[str, Any]) -> WorkflowDef:
    """Rebuild a definition written by ``def_to_json``."""
    names: list[str] = data["names"]
    n = len(names)
    kwargs = dense(data["kwargs"], n, None)
    pick = names.__getitem__
    extra: list[dict[str, Any] | None] = [None] * n
    for key, col in data.get("fields", {}).items():
        for i, value in zip(col["i"], col["v"], strict=True):
            row = extra[i]
            if row is None:
                row = extra[i] = {}
            row[key] = _sub_from_json(value) if key == "workflow" else value
    tasks = [
        TaskDef(name, kw if kw is not None else {}, tuple(map(pick, deps)), **(more or {}))
        for name, kw, deps, more in zip(names, kwargs, data["deps"], extra, strict=True)
    ]
    top = {key: data[key] for key in _WF_DEFAULTS if key in data}
    return WorkflowDef(name=data["name"], tasks=tuple(tasks), params=data.get("params", {}),
                       parameters=data.get("parameters", {}), **top)


def _sub_to_json(sub: SubWorkflow | None) -> dict[str, Any] | None:
    if sub is None:
        return None
    out: dict[str, Any] = {}
    if sub.definition is not None:
        out["definition"] = def_to_json(sub.definition)
    if sub.path is not None:
        out["path"] = sub.path
    if sub.factory is not None:
        out["factory"] = sub.factory
    if sub.params:
        out["params"] = dict(sub.params)
    return out


def _sub_from_json(data: dict[str, Any] | None) -> SubWorkflow | None:
    if data is None:
        return None
    child = data.get("definition")
    return SubWorkflow(
        definition=def_from_json(child) if child is not None else None,
        path=data.get("path"), factory=data.get("factory"), params=data.get("params", {}))


def sparse(values: list[Any], default: Any) -> dict[str, list[Any]]:
    """``values`` as ``{"i": indexes, "v": values}`` of the entries that differ from
    ``default``."""
    idx = [i for i, v in enumerate(values) if v != default]
    return {"i": idx, "v": [values[i] for i in idx]}


def dense(col: dict[str, list[Any]], n: int, default: Any) -> list[Any]:
    """The ``n`` values of a column written by ``sparse``."""
    out = [default] * n
    for i, v in zip(col["i"], col["v"], strict=True):
        out[i] = v
    return out

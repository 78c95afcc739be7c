"""Compact JSON form of a ``WorkflowDef`` for the state blob (columnar, defaults omitted).

Task fields other than ``name``, ``kwargs`` and ``depends_on`` are stored sparsely: only
tasks whose value differs from the default appear. Dependencies are stored as task
indexes. ``def_from_json(def_to_json(d)) == d`` for every definition whose mappings hold
JSON values (tuples inside ``kwargs`` or ``params`` come back as lists).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from shared.core.model import SubWorkflow, TaskDef, WorkflowDef

_TASK_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in fields(TaskDef)
    if f.name not in ("name", "kwargs", "depends_on", "workflow")
}
_WF_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in fields(WorkflowDef) if f.name not in ("name", "tasks", "params")
}


def def_to_json(defn: WorkflowDef) -> dict[str, Any]:
    """The definition as a JSON-ready dict."""
    index = {t.name: i for i, t in enumerate(defn.tasks)}
    out: dict[str, Any] = {"name": defn.name}
    for key, default in _WF_DEFAULTS.items():
        value = getattr(defn, key)
        if value != default:
            out[key] = value
    if defn.params:
        out["params"] = dict(defn.params)
    tasks = defn.tasks
    out["names"] = [t.name for t in tasks]
    out["kwargs"] = sparse([dict(t.kwargs) for t in tasks], {})
    out["deps"] = [[index[d] for d in t.depends_on] for t in tasks]
    extra: dict[str, Any] = {}
    for key, default in _TASK_DEFAULTS.items():
        col = sparse([getattr(t, key) for t in tasks], default)
        if col["i"]:
            extra[key] = col
    subs = sparse([_sub_to_json(t.workflow) for t in tasks], None)
    if subs["i"]:
        extra["workflow"] = subs
    if extra:
        out["fields"] = extra
    return out


def def_from_json(data: dict[str, Any]) -> WorkflowDef:
    """Rebuild a definition written by ``def_to_json``."""
    names: list[str] = data["names"]
    n = len(names)
    kwargs = dense(data["kwargs"], n, None)
    columns = {key: dense(col, n, _TASK_DEFAULTS.get(key))
               for key, col in data.get("fields", {}).items()}
    if "workflow" in columns:
        columns["workflow"] = [_sub_from_json(v) for v in columns["workflow"]]
    tasks = []
    for i, name in enumerate(names):
        extra = {key: col[i] for key, col in columns.items()}
        kw = kwargs[i]
        tasks.append(TaskDef(
            name=name, kwargs=kw if kw is not None else {},
            depends_on=tuple(names[j] for j in data["deps"][i]), **extra))
    top = {key: data[key] for key in _WF_DEFAULTS if key in data}
    return WorkflowDef(name=data["name"], tasks=tuple(tasks), params=data.get("params", {}),
                       **top)


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

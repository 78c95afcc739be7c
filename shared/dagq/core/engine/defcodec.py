"""Compact JSON form of a ``WorkflowDef`` for the state blob (columnar, defaults omitted).

Task fields other than ``name``, ``kwargs`` and ``depends_on`` are stored sparsely: only
tasks whose value differs from the default appear. Dependencies are stored as task
indexes, each task's ``kwargs`` as its own JSON text (``kw``; older states have the
``kwargs`` objects inline). ``def_from_json(def_to_json(d)) == d`` for every definition
whose mappings hold JSON values (tuples inside ``kwargs`` or ``params`` come back as lists).

``def_from_json(data, lazy=True)`` keeps the tasks as these columns (``LazyTasks``) and
builds a ``TaskDef`` only when one is asked for: a state of 100,000 tasks then holds no
100,000 task objects and kwargs dictionaries, only their names and texts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields
from operator import attrgetter
from typing import Any, NamedTuple, cast, overload

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
    out["kw"] = sparse([_kw_text(t.kwargs) for t in tasks], None)
    out["deps"] = _dependency_lists(tasks, index)
    extra: dict[str, dict[str, list[Any]]] = {}
    rows = list(map(_extra_of, tasks))
    if rows.count(_DEFAULT_ROW) == len(rows):
        rows = []  # the common case: every task's other fields at their default
    for i, row in enumerate(rows):
        if row == _DEFAULT_ROW:
            continue  # one comparison instead of one per field
        for key, value, default in zip(_EXTRA_FIELDS, row, _DEFAULT_ROW, strict=True):
            if value != default:
                col = extra.setdefault(key, {"i": [], "v": []})
                col["i"].append(i)
                col["v"].append(_sub_to_json(value) if key == "workflow" else value)
    if extra:
        out["fields"] = extra
    return out


def _dependency_lists(tasks: Sequence[TaskDef], index: dict[str, int]) -> list[list[int]]:
    """Each task's dependencies as indexes; equal lists are one object (the JSON is the
    same, and a fan-out's tasks all depend on the same root)."""
    find = index.__getitem__
    known: dict[tuple[str, ...], list[int]] = {}
    out = []
    for t in tasks:
        ids = known.get(t.depends_on)
        if ids is None:
            ids = known[t.depends_on] = list(map(find, t.depends_on))
        out.append(ids)
    return out


def def_from_json(data: dict[str, Any], *, lazy: bool = False) -> WorkflowDef:
    """Rebuild a definition written by ``def_to_json`` (its tasks as ``LazyTasks``
    when ``lazy``)."""
    names: list[str] = data["names"]
    n = len(names)
    if "kw" in data:  # equal texts held once (a fan-out's tasks often share their kwargs)
        seen: dict[str, str] = {}
        kwargs = [None if k is None else seen.setdefault(k, k)
                  for k in dense(data["kw"], n, None)]
    else:
        kwargs = dense(data["kwargs"], n, None)
    extra: list[dict[str, Any] | None] = [None] * n
    fields: dict[str, tuple[list[int], list[Any]]] = {}
    for key, col in data.get("fields", {}).items():
        values = [_sub_from_json(v) for v in col["v"]] if key == "workflow" else col["v"]
        fields[key] = (col["i"], values)
        for i, value in zip(col["i"], values, strict=True):
            row = extra[i]
            if row is None:
                row = extra[i] = {}
            row[key] = value
    lazy_tasks = LazyTasks(names, kwargs, data["deps"], extra, fields)
    tasks = cast(tuple[TaskDef, ...], lazy_tasks if lazy else tuple(lazy_tasks))
    top = {key: data[key] for key in _WF_DEFAULTS if key in data}
    return WorkflowDef(name=data["name"], tasks=tasks, params=data.get("params", {}),
                       parameters=data.get("parameters", {}), **top)


class Columns(NamedTuple):
    """What the engine's graph reads of a decoded definition, column by column."""

    names: list[str]
    """Every task's name."""
    deps: Sequence[Sequence[int]]
    """Every task's dependencies, as task indexes."""
    fields: dict[str, tuple[list[int], list[Any]]]
    """Per other task field, the indexes of the tasks whose value is not the default,
    and those values."""


class LazyTasks(Sequence[TaskDef]):
    """A decoded definition's tasks kept as columns; ``TaskDef`` objects are built on
    access (and not kept)."""

    __slots__ = ("_deps", "_extra", "_fields", "_index", "_kwargs", "_names")

    def __init__(self, names: list[str], kwargs: list[Any], deps: Sequence[Sequence[int]],
                 extra: list[dict[str, Any] | None],
                 fields: dict[str, tuple[list[int], list[Any]]] | None = None) -> None:
        self._names, self._kwargs, self._deps, self._extra = names, kwargs, deps, extra
        self._fields = fields or {}
        self._index: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self._names)

    @overload
    def __getitem__(self, i: int) -> TaskDef: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[TaskDef, ...]: ...

    def __getitem__(self, i: int | slice) -> TaskDef | tuple[TaskDef, ...]:
        if isinstance(i, slice):
            return tuple(self._make(k) for k in range(*i.indices(len(self._names))))
        return self._make(range(len(self._names))[i])

    def __iter__(self) -> Iterator[TaskDef]:
        return (self._make(i) for i in range(len(self._names)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def task(self, name: str) -> TaskDef:
        """The task called ``name`` (``KeyError`` if absent)."""
        if self._index is None:
            self._index = {n: i for i, n in enumerate(self._names)}
        return self._make(self._index[name])

    def share(self, index: dict[str, int], deps: list[tuple[int, ...]]) -> None:
        """Use the graph's name index and dependency ids (the same data, held once)."""
        self._index, self._deps = index, deps

    def columns(self) -> Columns:
        """The tasks as columns, without decoding any ``kwargs``."""
        return Columns(self._names, self._deps, self._fields)

    def _make(self, i: int) -> TaskDef:
        kw = self._kwargs[i]
        if isinstance(kw, str):
            kw = json.loads(kw)
        names = self._names
        return TaskDef(names[i], kw if kw is not None else {},
                       tuple(names[d] for d in self._deps[i]), **(self._extra[i] or _EMPTY))


_EMPTY: dict[str, Any] = {}


def _kw_text(kwargs: Any) -> str | None:
    if not kwargs:
        return None
    return compact_json(kwargs if type(kwargs) is dict else dict(kwargs))


def _compact_encoder() -> Callable[[Any, int], Any] | None:
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator: json.dumps it is
        return None

    def refuse(value: object) -> None:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

    # no markers (cycle check): a failed call would leave entries behind; validated
    # definitions hold no cycles, and anything that fails is encoded again by json.dumps
    encoder: Callable[[Any, int], Any] = make(None, refuse, json.encoder.encode_basestring, None,
                                         ":", ",", False, False, True)
    return encoder


_ENCODER = _compact_encoder()


def compact_json(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``, through one reused
    C encoder: ``json.dumps`` builds a new encoder each call, which was most of the cost of
    encoding 100,000 small ``kwargs``."""
    if _ENCODER is not None:
        try:
            return "".join(_ENCODER(value, 0))
        except (TypeError, ValueError, RecursionError):
            pass  # json.dumps raises its own, exact error
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


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
    if values.count(default) == len(values):  # the usual column: one pass in C
        return {"i": [], "v": []}
    idx = [i for i, v in enumerate(values) if v != default]
    return {"i": idx, "v": [values[i] for i in idx]}


def dense(col: dict[str, list[Any]], n: int, default: Any) -> list[Any]:
    """The ``n`` values of a column written by ``sparse``."""
    out = [default] * n
    for i, v in zip(col["i"], col["v"], strict=True):
        out[i] = v
    return out

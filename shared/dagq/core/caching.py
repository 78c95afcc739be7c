"""Task caching: which tasks may reuse an earlier result, and the key that decides it.

A task with ``cache: true`` (or ``cache: {max_age: 7d, version: "2", params: [epochs]}``;
a workflow-level ``cache`` sets the default for every task) is looked up before it is
dispatched. Its *cache key* is a digest of everything that determines its result:

- ``command``: the task's ``kwargs`` (``cmd`` or ``call``/``args``, ``cwd``, ...) as the
  worker gets them, parameters and item already written in;
- ``env``: its ``kwargs.env``, likewise rendered;
- ``params``: the parameters named in ``cache.params`` (a task reads the others only
  through ``{params.NAME}``, which the command already holds);
- ``item``: the item of an instance of a mapped task;
- ``inputs``: one digest per direct upstream output (the content, however it is stored);
- ``version``: ``cache.version``, the version of the code or image it runs;
- ``files``: digests of the files named in ``cache.files``, taken when it is submitted;
- ``queue``: the queue (hardware class) it runs on.

Each component is kept apart as its own digest, so a miss can say which one changed
against an earlier run. Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from dagq.core import values
from dagq.core.model import MappedOutputs, OutputRef, WorkflowDef
from dagq.core.rules import describe

SPEC_KEYS = ("max_age", "version", "params", "files", "refresh")
COMPONENTS = ("command", "env", "params", "item", "inputs", "version", "files", "queue")
"""The parts of a cache key, in the order a plan reports them."""
MAX_AGE_S = 10 * 365 * 86400
"""The longest ``max_age`` accepted (ten years)."""
_AGE_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d|w)?")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, None: 1}


@dataclass(frozen=True, slots=True)
class CachePolicy:
    """How one task uses the cache."""

    max_age_s: float | None = None
    """Entries older than this are not used (``None``: any age)."""
    version: str = ""
    """Part of the key: bump it when the code or image changes."""
    params: tuple[str, ...] = ()
    """Parameters that are part of the key beyond those written into ``kwargs``."""
    files: Mapping[str, str] | None = None
    """Digests of the files named in ``cache.files`` (taken at submit)."""
    refresh: bool = False
    """Run without looking up, and store the result over any entry of its key
    (``dagq rerun --from`` sets it on the tasks it runs again)."""


def parse_age(value: object) -> float:
    """Seconds of a ``max_age`` such as ``7d``, ``12h``, ``30m``, ``90`` or ``1.5w``;
    ``ValueError`` saying what is accepted."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        seconds = float(value)
    else:
        match = _AGE_RE.fullmatch(value.strip()) if isinstance(value, str) else None
        if match is None:
            raise ValueError(f"cache.max_age must be a number of seconds or a duration such "
                             f"as 30m, 12h, 7d or 2w, got {describe(value)}")
        seconds = float(match.group(1)) * _UNIT[match.group(2)]
    if seconds > MAX_AGE_S:
        raise ValueError(f"cache.max_age is at most ten years, got {describe(value)}")
    return seconds


def spec_problems(value: object) -> Iterator[tuple[str, str]]:
    """``(message, field)`` for each problem of a ``cache`` field."""
    if value is None or isinstance(value, bool):
        return
    if not isinstance(value, Mapping):
        yield (f"cache must be true, false or a mapping like {{max_age: 7d}}, got "
               f"{describe(value)}"), "cache"
        return
    for key in value:
        if key not in SPEC_KEYS:
            yield f"cache has unknown key {key!r}; allowed: {', '.join(SPEC_KEYS)}", \
                f"cache.{key}"
    if value.get("max_age") is not None:
        try:
            parse_age(value["max_age"])
        except ValueError as exc:
            yield str(exc), "cache.max_age"
    if not isinstance(value.get("refresh", False), bool):
        yield f"cache.refresh must be true or false, got {describe(value['refresh'])}", \
            "cache.refresh"
    if "version" in value and (isinstance(value["version"], bool)
                               or not isinstance(value["version"], str | int | float)):
        yield f"cache.version must be a string, got {describe(value['version'])}", \
            "cache.version"
    for key in ("params", "files"):
        names = value.get(key, [])
        if isinstance(names, Mapping) and key == "files":
            continue  # digests taken at submit
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            yield f"cache.{key} must be a list of names, got {describe(names)}", f"cache.{key}"


def policy_of(task_value: object, workflow_value: object) -> CachePolicy | None:
    """The policy of a task (its ``cache``, else the workflow's), or None: no caching.
    The values are assumed valid (``spec_problems``)."""
    value = task_value if task_value is not None else workflow_value
    if value is None or value is False:
        return None
    if value is True:
        return CachePolicy()
    assert isinstance(value, Mapping)
    age = value.get("max_age")
    files = value.get("files")
    return CachePolicy(parse_age(age) if age is not None else None, str(value.get("version", "")),
                       tuple(value.get("params", ())),
                       files if isinstance(files, Mapping) else None,
                       value.get("refresh") is True)


def refreshed(task_value: bool | Mapping[str, Any] | None,
              workflow_value: bool | Mapping[str, Any] | None
              ) -> bool | Mapping[str, Any] | None:
    """The ``cache`` value that makes a task run again and store its result over its
    key's entry, keeping its policy (``dagq rerun --from``); ``None``/``False`` stay."""
    value = task_value if task_value is not None else workflow_value
    if value is None or value is False:
        return task_value
    return {**(value if isinstance(value, Mapping) else {}), "refresh": True}


def without_cache(defn: WorkflowDef) -> WorkflowDef:
    """``defn`` with the cache off for the workflow and every task, child workflow
    definitions included (``--no-cache``): nothing is looked up and no result is stored."""
    return replace(defn, cache=False, tasks=tuple(
        replace(t, cache=False, workflow=replace(t.workflow, definition=without_cache(
            t.workflow.definition)))
        if t.workflow is not None and t.workflow.definition is not None
        else replace(t, cache=False) for t in defn.tasks))


def digest(value: Any) -> str:
    """SHA-256 (hex, first 32 characters) of a JSON value in canonical form."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=_plain)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _plain(value: object) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def input_digest(value: Any) -> str:
    """The digest of one upstream output: the MD5 of its canonical bytes, the same
    whether it travels inline or stored (``OutputRef.md5``); a mapped task's outputs
    element by element."""
    if isinstance(value, OutputRef):
        return "md5:" + value.md5
    if type(value) is MappedOutputs:
        return digest([input_digest(v) for v in value])
    if value is None:
        return "null"
    return "md5:" + hashlib.md5(values.dumps(value), usedforsecurity=False).hexdigest()


def components(policy: CachePolicy, kwargs: Mapping[str, Any], params: Mapping[str, Any],
               inputs: Mapping[str, Any], queue: str, item: tuple[bool, Any]
               ) -> dict[str, Any]:
    """The key components of one attempt (see the module docstring); ``inputs`` maps
    each upstream name to its output (or ``OutputRef``)."""
    command = {k: v for k, v in kwargs.items() if k != "env"}
    mapped, value = item
    return {
        "command": digest(command),
        "env": digest(kwargs.get("env") or {}),
        "params": digest({n: params.get(n) for n in policy.params}),
        "item": digest(value) if mapped else "",
        "inputs": {name: input_digest(v) for name, v in sorted(inputs.items())},
        "version": policy.version,
        "files": digest(dict(policy.files)) if policy.files else "",
        "queue": queue,
    }


def cache_key(parts: Mapping[str, Any]) -> str:
    """The cache key of a set of components."""
    return digest({k: parts.get(k) for k in COMPONENTS})


def changed(now: Mapping[str, Any], before: Mapping[str, Any]) -> list[str]:
    """The components that differ (an input as ``inputs.NAME``), in ``COMPONENTS`` order."""
    out: list[str] = []
    for name in COMPONENTS:
        a, b = now.get(name), before.get(name)
        if name == "inputs" and isinstance(a, Mapping) and isinstance(b, Mapping):
            out += [f"inputs.{k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        elif a != b:
            out.append(name)
    return out

"""Removing finished workflows with everything they left in the store.

A workflow's footprint is its index row, its state, its attempt records (partition
``attempts~{id}``) and its objects in the output store: outputs, stashed files, synced
directories, large inputs and task logs (``{kind}/{id}/...``). Child workflows go with
their parent. Nothing expires by itself: ``dagq prune --older-than`` removes finished
workflows whose last update is older than the given age. Task cache entries
(``dagq.protocol.cache``) are not part of a run's footprint: they keep their own copy of
a large output (under ``cache/``), so they stay valid when their source run is
removed; ``prune(..., cache=True)`` removes the entries those runs made as well.

Deletion runs from the leaves up and removes the index row last, so an interrupted
prune leaves the workflow listed and the next prune finishes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from dagq.core.model import TERMINAL_WORKFLOW_STATUSES
from dagq.ports import Backend, IndexRow
from dagq.protocol import cache as task_cache
from dagq.protocol.attempts import partition

OBJECT_KINDS = ("outputs", "files", "dirs", "inputs", "logs")
"""Top-level object name prefixes that hold a workflow's objects (``{kind}/{id}/``)."""
_AGE_RE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
PAGE = 200


def parse_age(text: str) -> float:
    """Seconds in an age such as ``30d``, ``12h``, ``90m``, ``2w`` or ``3600s``;
    ``ValueError`` with an example otherwise."""
    m = _AGE_RE.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not an age: use a number and a unit s, m, h, d or w "
                         "(e.g. 30d, 12h)")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


@dataclass
class Removed:
    """What a deletion removed."""

    workflows: int = 0
    objects: int = 0
    records: int = 0
    cache_entries: int = 0


def delete_workflow(backend: Backend, workflow_id: str, removed: Removed | None = None) -> Removed:
    """Remove one workflow and its footprint (not its children; see ``prune``)."""
    removed = removed or Removed()
    for kind in OBJECT_KINDS:
        for name, _size, _md5 in backend.outputs.list(f"{kind}/{workflow_id}/"):
            backend.outputs.delete(name)
            removed.objects += 1
    part = partition(workflow_id)
    for key, _rec in backend.records.list(part):
        backend.records.delete(part, key)
        removed.records += 1
    backend.states.delete(workflow_id)
    backend.index.delete(workflow_id)
    removed.workflows += 1
    return removed


def _family(backend: Backend, root: str) -> list[str]:
    """``root`` and every workflow below it, deepest first."""
    prefix = f"{root}~"
    out, after = [], prefix
    while True:
        rows = backend.index.query(after=after, limit=PAGE)
        out += [r.id for r in rows if r.id.startswith(prefix)]
        if len(rows) < PAGE or not rows[-1].id.startswith(prefix):
            break
        after = rows[-1].id
    return [*sorted(out, key=lambda i: -i.count("~")), root]


def expired(backend: Backend, older_than_s: float, now: float) -> Iterator[IndexRow]:
    """Finished top-level workflows last updated more than ``older_than_s`` ago."""
    for status in sorted(TERMINAL_WORKFLOW_STATUSES):
        after = None
        while True:
            rows = backend.index.query(status=status, limit=PAGE, after=after)
            for r in rows:
                if r.parent_id is None and r.updated_at < now - older_than_s:
                    yield r
            if len(rows) < PAGE:
                break
            after = rows[-1].id


def prune(backend: Backend, older_than_s: float, now: float,
          dry_run: bool = False, cache: bool = False) -> tuple[list[str], Removed]:
    """Remove (or with ``dry_run`` only list) finished workflows older than the age,
    with their children (and with ``cache`` the cache entries they made); the ids of
    the top-level workflows and what was removed (or would be)."""
    ids = [r.id for r in expired(backend, older_than_s, now)]
    removed = Removed()
    if cache:
        made = made_by(backend, ids)
        removed.cache_entries = len(made)
        if not dry_run:  # entries first: an interrupted prune finds them again
            for entry in made:
                task_cache.delete(backend, entry)
    if not dry_run:
        for wf in ids:
            for member in _family(backend, wf):
                delete_workflow(backend, member, removed)
    return ids, removed


def made_by(backend: Backend, ids: list[str]) -> list[task_cache.Entry]:
    """The cache entries whose source run is one of ``ids`` or a child workflow of one."""
    roots = set(ids)
    return [e for e in task_cache.entries(backend)
            if e.workflow_id.split("~", 1)[0] in roots]

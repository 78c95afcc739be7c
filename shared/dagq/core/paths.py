"""Names of stored objects (outputs, stashed files, synced directories, spilled inputs, logs).

Every object name is built here from encoded segments, so a name chosen by a user (a task
name, a ``bg_dirsync_to.dest``, a file name) is always exactly one path segment:

- ``/``, ``\\``, ``%`` and every character outside ``A-Z a-z 0-9 - _ . ~`` are
  percent-encoded (UTF-8), so ``a/../b`` cannot climb out of its place and the task ``ck``
  has a prefix (``.../ck/``) that no other task's objects start with (``ck/x`` is
  ``ck%2Fx``);
- a trailing dot, and the segments ``.`` and ``..``, are encoded too: the Blob service
  rewrites dot segments and drops trailing dots in URLs, so ``x.`` would otherwise land on
  ``x``'s objects (https://learn.microsoft.com/rest/api/storageservices/naming-and-referencing-containers--blobs--and-metadata,
  "avoid blob names that end with a dot").

The encoding is injective, so distinct names never share an object. Names of objects
already stored are kept verbatim in their references (``OutputRef.name``), so objects written
under an earlier naming stay readable.
"""

from __future__ import annotations

import re

from dagq.core.limits import BLOB_NAME_MAX_CHARS, SEGMENT_MAX_CHARS

__all__ = ["dir_entry", "dir_prefix", "dir_relative", "file_name", "input_spill_name",
           "log_name", "output_name", "segment", "segment_problem"]

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")
_ESCAPE = re.compile(r"(?:%[0-9A-F]{2})+")


def _quote(text: str) -> str:
    return "".join(ch if ch in _SAFE else "".join(
        f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")) for ch in text)


def _unquote(text: str) -> str:
    return _ESCAPE.sub(lambda m: bytes.fromhex(m.group().replace("%", "")).decode(
        "utf-8", "surrogatepass"), text)


def segment(name: str) -> str:
    """``name`` as one path segment of an object name (see the module docstring)."""
    encoded = _quote(name)
    if not encoded:
        return "%00"  # never produced by a valid name; keeps the segment non-empty
    if encoded.strip(".") == "":
        return encoded.replace(".", "%2E")
    if encoded.endswith("."):
        stem = encoded.rstrip(".")
        return stem + "%2E" * (len(encoded) - len(stem))
    return encoded


def segment_problem(name: str, what: str) -> str | None:
    """Why ``name`` cannot be one object-name segment (too long once encoded), or None."""
    size = len(segment(name))
    if size > SEGMENT_MAX_CHARS:
        return (f"{what} takes {size} characters once encoded for object names; the limit "
                f"is {SEGMENT_MAX_CHARS} (Azure blob names are at most {BLOB_NAME_MAX_CHARS})")
    return None


def output_name(workflow_id: str, task: str, attempt: int) -> str:
    """Object holding a task's large output."""
    return f"outputs/{segment(workflow_id)}/{segment(task)}/{attempt}.json"


def file_name(workflow_id: str, task: str, filename: str) -> str:
    """Object holding a file a task stashed (``dagq.task.stash_file``)."""
    return f"files/{segment(workflow_id)}/{segment(task)}/{segment(filename)}"


def files_prefix(workflow_id: str, task: str) -> str:
    """Common start of the objects a task stashed (``file_name``); ends in ``/``."""
    return f"files/{segment(workflow_id)}/{segment(task)}/"


def dir_prefix(workflow_id: str, name: str) -> str:
    """Common start of the objects of a directory synced as ``name`` (``bg_dirsync_to``);
    ends in ``/``, and no other name's prefix starts with it."""
    return f"dirs/{segment(workflow_id)}/{segment(name)}/"


def dir_entry(prefix: str, relative: str) -> str:
    """Object of the file at ``relative`` (``/``-separated) under ``dir_prefix``; each part
    is encoded, the ``/`` between parts kept."""
    return prefix + "/".join(segment(part) for part in relative.split("/"))


def dir_relative(prefix: str, name: str) -> str:
    """Inverse of :func:`dir_entry`: the relative path of object ``name``."""
    return "/".join(_unquote(part) for part in name[len(prefix):].split("/"))


def input_spill_name(workflow_id: str, task: str, attempt: int) -> str:
    """Object holding the inputs of a task message too large to carry them inline."""
    return f"inputs/{segment(workflow_id)}/{segment(task)}/{attempt}.json"


def payload_spill_name(workflow_id: str, task: str, attempt: int) -> str:
    """Object holding the kwargs, params and inputs of a task message too large to carry
    even its kwargs inline."""
    return f"inputs/{segment(workflow_id)}/{segment(task)}/{attempt}.payload.json"


def log_name(workflow_id: str, task: str, attempt: int) -> str:
    """Object holding the log of one attempt of a task."""
    return f"logs/{segment(workflow_id)}/{segment(task)}/{attempt}.log"

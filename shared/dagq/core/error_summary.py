"""One error summary per attempt: the line every view shows for a failed attempt.

A failed attempt's error text is what the worker sends: a header it writes itself
(``command exited with code 1``, ``command was killed by signal 9``, ``command timed
out after 5s``, ``function pkg.mod:fn exited with code 1``, or the message a function
task raised) and, for processes, the end of what the task printed. stdout and stderr
arrive interleaved in one log, in the order they were written, so the rule cannot ask
which stream a line came from; it asks what the line looks like:

1. no text: no summary;
2. a header that says why on its own (a function's exception, a timeout, a refused
   task, a cancel, a lost worker): that header;
3. a generic process header (``exited with code N``, ``killed by signal N``): the last
   printed line shaped like an exception or an error message (``ValueError: bad row
   42``, ``error: ...``, ``fatal: ...``, ``panic: ...``, ``x.c:3: error: ...``, the end
   of a ``Traceback``), else the last line with an error word in it (``No such file or
   directory``, ``permission denied``, ``not found``, ``cannot``, ``failed``, ...), else
   the header itself. A plain output line (``shard 3``) is never the summary.

``dagq status``, ``task``, ``run``, ``watch``, ``explain``, the HTTP task rows
(``error_line``), the attempt records (``error``) and the web page all show
``error_summary`` of the same text. ``clip_error`` bounds a text for the wire while
keeping what the summary reads (the header and the end).
"""

from __future__ import annotations

import re

_GENERIC = re.compile(r" (?:exited with code -?\d+|was killed by signal \d+)$")
"""The end of a worker's header that does not say why by itself."""
_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Fault|Failure|"
    r"Warning)(?::\s.*)?$")
"""``ValueError: bad row 42``, ``requests.exceptions.HTTPError: 500``, ``KeyboardInterrupt``."""
_ERROR_LINE = re.compile(
    r"^(?:error|fatal|panic)\b|"  # error: ..., FATAL ..., panic: ...
    r"^\[(?:error|fatal|critical)\]|"  # [ERROR] ...
    r"[:\s](?:error|fatal)\s*:|"  # x.c:3:1: error: ..., sh: fatal: ...
    r"^exception in thread ",
    re.IGNORECASE)
_ERROR_WORDS = re.compile(
    r"\b(?:errors?|exception|fatal|killed|failed|failure|denied|not found|"
    r"no such file|cannot|can't|unable|refused|segmentation fault|out of memory)\b",
    re.IGNORECASE)
_NOT_AN_ERROR = re.compile(r"\b(?:0|no|zero) (?:errors?|failures?)\b|\bwithout errors?\b",
                           re.IGNORECASE)


def error_summary(error: str | None) -> str | None:
    """The one line that says why an attempt failed (see the module docstring)."""
    if not error:
        return None
    lines = [ln.strip() for ln in error.splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines:
        return None
    head, rest = lines[0], lines[1:]
    if not _GENERIC.search(head):
        return head
    return _error_shaped(rest) or head


def _error_shaped(lines: list[str]) -> str | None:
    """The last line shaped like an error message, else the last with an error word."""
    for ln in reversed(lines):
        if _EXCEPTION.match(ln) or _ERROR_LINE.search(ln):
            return ln
    for ln in reversed(lines):
        if _ERROR_WORDS.search(ln) and not _NOT_AN_ERROR.search(ln):
            return ln
    return None


def clip_error(error: str, limit: int) -> str:
    """``error`` in at most ``limit`` characters, its first line (the header) and its end
    kept: ``error_summary`` reads the same from the clipped text as from the whole one
    as long as the line it picks lies in the kept end."""
    if len(error) <= limit:
        return error
    head, sep, _ = error.partition("\n")
    head = head[:max(limit // 4, 1)]
    room = limit - len(head) - len(sep) - 4
    if room <= 0:
        return error[:limit]
    return f"{head}{sep}...\n{error[-room:]}"

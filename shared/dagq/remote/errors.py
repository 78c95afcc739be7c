"""Turns the API's error answers back into the errors the direct client raises.

The server answers ``{"error", "code", "details"}``; the code picks the class (the same
one ``WorkflowClient`` would have raised in-process) and the message is the server's, so
a script or the CLI reports the same thing whichever way it reached the store.
"""

from __future__ import annotations

from typing import Any

import httpx

from dagq.errors import (
    DagqError,
    DefinitionError,
    IdConflict,
    NotFound,
    Problem,
    RemoteError,
    StoreUnavailable,
    TaskError,
    WorkflowFinished,
    WorkflowNotFound,
)

_BY_CODE: dict[str, type[DagqError]] = {
    "not_found": WorkflowNotFound,
    "file_not_found": NotFound,
    "id_conflict": IdConflict,
    "task_error": TaskError,
    "store_unavailable": StoreUnavailable,
}
"""Error codes of the API and the exception each becomes (``finished`` is special-cased:
it carries the workflow's id and status)."""
_PROBLEM_FIELDS = ("message", "task", "field", "line", "column")


def problem_of(detail: Any) -> Problem:
    """A ``Problem`` from one ``details`` entry of an ``invalid_definition`` answer."""
    if not isinstance(detail, dict):
        return Problem(str(detail))
    return Problem(**{k: detail[k] for k in _PROBLEM_FIELDS if k in detail})


def error_of(resp: httpx.Response) -> DagqError:
    """The error an unsuccessful answer stands for."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    request = f"{resp.request.method} {resp.request.url.copy_with(query=None)}"
    if not (isinstance(body, dict) and isinstance(body.get("error"), str)):
        text = resp.text.strip().replace("\n", " ")[:200]
        hint = _auth_hint(resp.status_code)
        return RemoteError(f"{request} answered {resp.status_code}"
                           f"{': ' + text if text else ''}{hint}", resp.status_code)
    message, code = body["error"], str(body.get("code") or "")
    raw = body.get("details")
    details: list[Any] = raw if isinstance(raw, list) else []
    if code == "invalid_definition":
        return DefinitionError([problem_of(d) for d in details] or [Problem(message)])
    if code == "finished" and isinstance(body, dict):
        return WorkflowFinished(message, str(body.get("id", "")), str(body.get("status", "")))
    kind = _BY_CODE.get(code)
    if kind is not None:
        return kind(message)
    return RemoteError(message + _auth_hint(resp.status_code), resp.status_code, code, details)


def _auth_hint(status: int) -> str:
    if status in (401, 403):
        return (" (set DAGQ_API_KEY to a function key, or DAGQ_API_SCOPE / DAGQ_API_TOKEN "
                "for an Entra ID token)")
    return ""


def raise_for_answer(resp: httpx.Response) -> None:
    """Raise the matching dagq error unless ``resp`` is a success."""
    if resp.status_code >= 400:
        raise error_of(resp)

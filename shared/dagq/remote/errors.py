"""Turns the API's error answers back into the errors the direct client raises.

The server answers ``{"error", "code", "details"}``; the code picks the class from the one
table both ends share (``dagq.protocol.http.ERRORS``: the class ``WorkflowClient`` would
have raised in-process) and the message is the server's, so a script or the CLI reports
the same thing whichever way it reached the store.
"""

from __future__ import annotations

import re
from typing import Any

import httpx

from dagq.errors import DagqError, RemoteError, TaskError, TaskNotFound
from dagq.protocol.http import UNAUTHORIZED, raised_error

_NO_TASK = re.compile(r"has no (task|attempt) ")
"""The messages of ``TaskNotFound`` (``dagq.client``), which the server answers with the
``task_error`` code of every ``TaskError``."""


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
    raised = raised_error(body)
    if isinstance(raised, TaskError) and _NO_TASK.search(str(raised)):
        return TaskNotFound(str(raised))  # the wire has one code for both (task_error)
    if raised is not None:
        return raised
    raw = body.get("details")
    details: list[Any] = raw if isinstance(raw, list) else []
    return RemoteError(body["error"] + _auth_hint(resp.status_code), resp.status_code,
                       str(body.get("code") or ""), details)


def _auth_hint(status: int) -> str:
    if status in (UNAUTHORIZED.status, 403):
        return (" (set DAGQ_API_KEY to a function key, or DAGQ_API_SCOPE / DAGQ_API_TOKEN "
                "for an Entra ID token)")
    return ""


def raise_for_answer(resp: httpx.Response) -> None:
    """Raise the matching dagq error unless ``resp`` is a success."""
    if resp.status_code >= 400:
        raise error_of(resp)

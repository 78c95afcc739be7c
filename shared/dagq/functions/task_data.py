"""HTTP handlers for what a task left behind: its output and the files it synced.

``GET /workflows/{id}/tasks/{task}/output`` answers ``{"id", "task", "output"}`` (the
output is ``null`` when the task published none); ``.../files`` lists the synced files as
``{"id", "task", "files": [{"path", "size", "md5"}]}`` and ``.../files/{path}`` returns one
file's bytes (``Content-MD5`` set, checked against the store's MD5 before sending). Like
the other handlers they parse, call ``WorkflowClient`` and let the caller map errors.
"""

from __future__ import annotations

import base64
import hashlib

import azure.functions as func

from dagq.errors import NotFound
from dagq.functions.errors import ApiError, json_response
from dagq.functions.runtime import Runtime
from dagq.protocol.http import BAD_PARAMETER, FILE_NOT_FOUND


def route_value(req: func.HttpRequest, name: str, what: str) -> str:
    """The route parameter ``name``; 400 when it is missing or empty."""
    value = str(req.route_params.get(name) or "")
    if not value:
        raise ApiError(BAD_PARAMETER, f"the URL names no {what}")
    return value


def _ids(req: func.HttpRequest) -> tuple[str, str]:
    return route_value(req, "id", "workflow id"), route_value(req, "task", "task")


def task_output(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """``GET /workflows/{id}/tasks/{task}/output``."""
    workflow_id, task = _ids(req)
    value = runtime.client().output(workflow_id, task)
    return json_response({"id": workflow_id, "task": task, "output": value})


def task_files(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """``GET /workflows/{id}/tasks/{task}/files``."""
    workflow_id, task = _ids(req)
    entries = runtime.client().files(workflow_id, task)
    return json_response({"id": workflow_id, "task": task, "files": entries})


def task_file(runtime: Runtime, req: func.HttpRequest) -> func.HttpResponse:
    """``GET /workflows/{id}/tasks/{task}/files/{path}``: the bytes of one synced file."""
    workflow_id, task = _ids(req)
    path = route_value(req, "path", "file path")
    try:
        data = runtime.client().file(workflow_id, task, path)
    except NotFound as exc:
        raise ApiError(FILE_NOT_FOUND, str(exc)) from None
    digest = base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()
    return func.HttpResponse(data, status_code=200, mimetype="application/octet-stream",
                             headers={"Content-MD5": digest})


"""``Client``: the dagq HTTP API with the verbs and return types of ``WorkflowClient``.

``Client("https://APP.azurewebsites.net", key=...)`` (or ``dagq serve``'s URL) submits,
inspects, waits for, cancels and retries workflows, and reads task outputs, synced files
and logs, over HTTP only: no storage or Service Bus credentials are needed. Errors are
the ones ``WorkflowClient`` raises (``WorkflowNotFound``, ``DefinitionError`` with every
problem, ``IdConflict``, ``TaskError``, ...) carrying the server's message; an answer no
such error describes raises ``RemoteError``, and an unreachable API ``StoreUnavailable``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import httpx

from dagq import __version__
from dagq.compose.loader import load_file
from dagq.core.model import WorkflowDef
from dagq.core.parse import definition_to_dict
from dagq.errors import ConfigError, DefinitionError, Problem, StoreUnavailable, TaskError
from dagq.protocol import http
from dagq.protocol.http import MAX_PAGE, MAX_WAIT_S, MD5_HEADER, Submitted, log_position
from dagq.protocol.synced import write_files
from dagq.remote.auth import ApiAuth, EntraToken, TokenSource, auth_from_env
from dagq.remote.errors import raise_for_answer
from dagq.views.task_details import LogRead
from dagq.views.task_rows import TaskPage
from dagq.views.waiting import is_terminal

Definition = WorkflowDef | Mapping[str, Any] | str | bytes | os.PathLike[str]
"""What ``submit`` takes: a definition object, a mapping, YAML/JSON text, or a file path
(``pathlib.Path``; a ``str`` is always text)."""


def api_base(url: str) -> str:
    """``url`` normalised to the API root ending in ``/api``; ``ConfigError`` if unusable."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"API URL {url!r} is not an http(s) URL: use e.g. "
                          "--api https://APP.azurewebsites.net or DAGQ_API=http://127.0.0.1:7071")
    path = parts.path.rstrip("/")
    if not path.endswith("/api"):
        path += "/api"
    return f"{parts.scheme}://{parts.netloc}{path}"


class Client:
    """Operations on the workflows behind a dagq HTTP API (thread-safe)."""

    def __init__(self, url: str, *, key: str | None = None, token: TokenSource | None = None,
                 scope: str | None = None, timeout_s: float = 60.0,
                 auth: ApiAuth | None = None) -> None:
        self.url = api_base(url)
        if auth is None:
            auth = ApiAuth(key, token if token is not None else
                           EntraToken(scope) if scope else None)
        self._http = httpx.Client(auth=auth, timeout=timeout_s,
                                  headers={"User-Agent": f"dagq/{__version__}"})

    @classmethod
    def from_env(cls, url: str | None = None, env: Mapping[str, str] | None = None) -> Client:
        """A client for ``url`` (default ``DAGQ_API``) with credentials from the
        environment: ``DAGQ_API_KEY``, ``DAGQ_API_TOKEN`` or ``DAGQ_API_SCOPE``."""
        env = os.environ if env is None else env
        url = url or env.get("DAGQ_API")
        if not url:
            raise ConfigError("no API URL: pass --api URL or set DAGQ_API "
                              "(e.g. DAGQ_API=https://APP.azurewebsites.net)")
        return cls(url, auth=auth_from_env(env))

    # -- plumbing ----------------------------------------------------------------------
    def _send(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
              content: bytes | None = None, content_type: str | None = None,
              timeout_s: float | None = None) -> httpx.Response:
        headers = {"Content-Type": content_type} if content_type else None
        query = {k: str(v) for k, v in (params or {}).items() if v is not None}
        extra: dict[str, Any] = {} if timeout_s is None else {"timeout": timeout_s}
        try:
            resp = self._http.request(method, self.url + path, params=query, content=content,
                                      headers=headers, **extra)
        except httpx.TransportError as exc:
            raise StoreUnavailable(f"cannot reach the dagq API at {self.url}: {exc} "
                                   "(check --api / DAGQ_API)") from None
        raise_for_answer(resp)
        return resp

    def _call(self, endpoint: http.Endpoint, *, params: Mapping[str, Any] | None = None,
              content: bytes | None = None, content_type: str | None = None,
              timeout_s: float | None = None, **route: str) -> httpx.Response:
        return self._send(endpoint.method, endpoint.path(**route), params=params,
                          content=content, content_type=content_type, timeout_s=timeout_s)

    def _answer(self, endpoint: http.Endpoint, **kwargs: Any) -> Any:
        return self._call(endpoint, **kwargs).json()

    # -- submission --------------------------------------------------------------------
    def submit(self, defn: Definition, *, workflow_id: str | None = None,
               max_fan_in: int | None = None,
               params: Mapping[str, Any] | None = None) -> Submitted:
        """Submit a definition; idempotent with ``workflow_id`` (``IdConflict`` when the id
        holds a different definition). ``params`` are run parameters over the definition's
        own (declared defaults filled in; unknown, missing or ill-typed ones raise
        ``DefinitionError``), as ``WorkflowClient.submit`` takes them. Invalid definitions
        raise ``DefinitionError``."""
        content, kind = definition_body(defn)
        answer = self._answer(http.SUBMIT, params={
            "id": workflow_id, "max_fan_in": max_fan_in,
            "params": json.dumps(dict(params)) if params is not None else None},
            content=content, content_type=kind)
        return Submitted(str(answer["id"]), bool(answer["created"]))

    def validate(self, defn: Definition) -> dict[str, Any]:
        """``{"valid", "name", "tasks"}``, or ``DefinitionError`` listing every problem."""
        content, kind = definition_body(defn)
        answer: dict[str, Any] = self._answer(http.VALIDATE, content=content,
                                              content_type=kind)
        return answer

    # -- control -----------------------------------------------------------------------
    def cancel(self, workflow_id: str, *, reason: str | None = None) -> None:
        """Request cancellation of the workflow and its active children."""
        self._call(http.CANCEL, id=workflow_id, params={"reason": reason} if reason else None)

    def retry(self, workflow_id: str, *, tasks: Sequence[str] = ()) -> str:
        """Retry failed, upstream-failed and cancelled tasks (or ``tasks`` and the tasks
        after them, whatever their status); the request id."""
        params = {"tasks": json.dumps(list(tasks))} if tasks else None
        return str(self._answer(http.RETRY, id=workflow_id, params=params)["request_id"])

    def suspend(self, workflow_id: str, suspended: bool = True) -> None:
        """Stop starting tasks of a running workflow (``suspended=False`` resumes it)."""
        self._call(http.SUSPEND if suspended else http.RESUME, id=workflow_id)

    # -- inspection --------------------------------------------------------------------
    def status(self, workflow_id: str) -> dict[str, Any]:
        """What ``dagq status --json`` prints (``children`` included when there are any)."""
        answer: dict[str, Any] = self._answer(http.GET_WORKFLOW, id=workflow_id)
        return answer

    def summary(self, workflow_id: str) -> dict[str, Any]:
        """``{"id","name","status","counts",...}`` without the children."""
        out = self.status(workflow_id)
        out.pop("children", None)
        return out

    def wait(self, workflow_id: str, timeout_s: float | None = None, *,
             interval_s: float = 1.0) -> dict[str, Any]:
        """Wait until the workflow is terminal or ``timeout_s`` has passed (``None``: no
        limit); its ``status`` then. Each request waits on the server (at most 200 s), so
        a long wait costs a request every few minutes, not one per poll."""
        del interval_s  # the server polls; kept for the same signature as WorkflowClient
        deadline = None if timeout_s is None else time.monotonic() + max(0.0, timeout_s)
        while True:
            left = MAX_WAIT_S if deadline is None else deadline - time.monotonic()
            wait = max(0, min(MAX_WAIT_S, int(left)))
            answer: dict[str, Any] = self._answer(http.GET_WORKFLOW, id=workflow_id,
                                                  params={"wait": wait or None},
                                                  timeout_s=wait + 60.0)
            if is_terminal(answer) or (deadline is not None and time.monotonic() >= deadline):
                return answer
            if wait == 0:  # under a second left: the server cannot wait that out
                time.sleep(max(0.0, left))

    def list_workflows(self, status: str | None = None, limit: int | None = None, *,
                       since: float | None = None,
                       name: str | None = None) -> list[dict[str, Any]]:
        """Summaries of workflows, newest first: only those with ``status``, created at or
        after ``since`` and whose name contains ``name``; at most ``limit``. The server
        filters and orders (``dagq.views.listing``); this reads its pages in turn."""
        out: list[dict[str, Any]] = []
        after: str | None = None
        while limit is None or len(out) < limit:
            size = MAX_PAGE if limit is None else min(MAX_PAGE, limit - len(out))
            page = self._answer(http.LIST_WORKFLOWS, params={
                "status": status, "since": since, "name": name, "order": "newest",
                "limit": size, "after": after})
            out += page["workflows"]
            after = page.get("next")
            if not after:
                break
        return out

    def explain(self, workflow_id: str, task: str | None = None) -> list[dict[str, Any]]:
        """Why each task (or ``task``) is where it is (``GET .../explain``)."""
        answer = self._answer(http.EXPLAIN, id=workflow_id, params={"task": task})
        return list(answer["tasks"])

    def graph(self, workflow_id: str) -> dict[str, Any]:
        """The run's graph model (``GET .../graph?format=json``)."""
        answer: dict[str, Any] = self._answer(http.GRAPH, id=workflow_id,
                                              params={"format": "json"})
        return answer

    def tasks(self, workflow_id: str, *, prefix: str | None = None, status: str | None = None,
              queue: str | None = None, offset: int = 0,
              limit: int | None = None, expand: bool = False) -> list[dict[str, Any]]:
        """The workflow's tasks (name, status, queue, attempt, ...) matching the filters,
        from ``offset`` and at most ``limit`` (a mapped task's instances with ``expand``)."""
        return self.task_page(workflow_id, prefix=prefix, status=status, queue=queue,
                              offset=offset, limit=limit, expand=expand).rows

    def task_page(self, workflow_id: str, *, prefix: str | None = None,
                  status: str | None = None, queue: str | None = None, offset: int = 0,
                  limit: int | None = None, attention_first: bool = False,
                  expand: bool = False) -> TaskPage:
        """A page of ``tasks`` with how many matched and the counts over every task
        (``GET .../tasks?offset=&limit=&order=``)."""
        answer = self._answer(http.LIST_TASKS, id=workflow_id, params={
            "prefix": prefix, "status": status, "queue": queue, "offset": offset or None,
            "limit": limit, "order": "attention" if attention_first else None,
            "expand": "true" if expand else None})
        rows = list(answer["tasks"])
        return TaskPage(rows, int(answer.get("total", len(rows))),
                        dict(answer.get("counts") or {}), dict(answer.get("phases") or {}))

    def output(self, workflow_id: str, task: str) -> Any:
        """The task's output (``None`` if it published none)."""
        return self._answer(http.TASK_OUTPUT, id=workflow_id, task=task)["output"]

    def files(self, workflow_id: str, task: str) -> list[dict[str, Any]]:
        """``[{"path","size","md5"}]`` of the files ``task`` synced."""
        return list(self._answer(http.TASK_FILES, id=workflow_id, task=task)["files"])

    def file(self, workflow_id: str, task: str, path: str) -> bytes:
        """One synced file's bytes, checked against the MD5 the server sent."""
        resp = self._call(http.TASK_FILE, id=workflow_id, task=task, path=path)
        data = resp.content
        sent = resp.headers.get(MD5_HEADER)
        if sent and base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode() \
                != sent:
            raise TaskError(f"file {path!r} of task {task!r} arrived corrupt (MD5 mismatch)")
        return data

    def download_files(self, workflow_id: str, task: str, dest: Path) -> list[Path]:
        """Write the files ``task`` synced into directory ``dest``; the paths written."""
        entries = [(str(e["path"]), str(e["md5"])) for e in self.files(workflow_id, task)]
        label = f"dirs/{workflow_id}/{task}/"
        return write_files(dest, label, entries,
                           lambda rel, md5: self._checked(workflow_id, task, rel, md5))

    def _checked(self, workflow_id: str, task: str, rel: str, md5: str) -> bytes:
        data = self.file(workflow_id, task, rel)
        if md5 and hashlib.md5(data, usedforsecurity=False).hexdigest() != md5:
            # a running sync may have replaced the file since the listing: list again
            fresh = {str(e["path"]): str(e["md5"]) for e in self.files(workflow_id, task)}
            if fresh.get(rel) != hashlib.md5(data, usedforsecurity=False).hexdigest():
                raise TaskError(f"file {rel!r} of task {task!r} does not match its MD5 {md5}")
        return data

    def task(self, workflow_id: str, task: str) -> dict[str, Any]:
        """One task's summary with its attempt history and explanation
        (``GET .../tasks/{task}``)."""
        answer: dict[str, Any] = self._answer(http.GET_TASK, id=workflow_id, task=task)
        return answer

    def logs(self, workflow_id: str, task: str, attempt: int | None = None,
             offset: int = 0, limit: int | None = None, follow: bool = False) -> LogRead:
        """What ``attempt`` (default the latest) of ``task`` printed from byte ``offset``
        (``GET .../tasks/{task}/logs``; the position comes back in headers)."""
        resp = self._call(http.TASK_LOGS, id=workflow_id, task=task,
                          params={"attempt": attempt, "offset": offset or None,
                                  "limit": limit, "follow": "true" if follow else None})
        got, next_offset, finished = log_position(resp.headers)
        return LogRead(attempt=got, data=resp.content, next_offset=next_offset,
                       finished=finished)

    def health(self) -> dict[str, Any]:
        """``GET /health``: the store and coordinator the API runs with."""
        answer: dict[str, Any] = self._answer(http.HEALTH)
        return answer

    # -- lifetime ----------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def definition_body(defn: Definition) -> tuple[bytes, str]:
    """The request body and content type for a definition; a file is loaded (child files
    inlined) and checked here, so bad input is reported before anything is sent."""
    if isinstance(defn, os.PathLike):
        defn = load_file(Path(defn))
    if isinstance(defn, WorkflowDef):
        try:
            data: Any = definition_to_dict(defn)
        except ValueError as exc:
            raise DefinitionError([Problem(str(exc))]) from None
        return json.dumps(data).encode(), "application/json"
    if isinstance(defn, Mapping):
        return json.dumps(dict(defn)).encode(), "application/json"
    data = defn.encode() if isinstance(defn, str) else bytes(defn)
    return data, "application/json" if data.lstrip()[:1] == b"{" else "application/yaml"

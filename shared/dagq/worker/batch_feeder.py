"""Azure Batch feeder: keeps one worker task per ``concurrency`` waiting messages in a job.

A Batch autoscale formula cannot read a queue's length, only Batch's own task counts. So
the feeder turns queue length into Batch tasks (each a ``dagq worker QUEUE --idle-timeout
...`` from ``task.json``) and the pool's formula, which sizes the pool from
``$PendingTasks``, turns those into nodes. Workers exit when idle, so the job drains by
itself when the queue does.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests

from dagq.errors import ConfigError, StoreUnavailable
from dagq.ports import Queue

log = logging.getLogger("dagq.batch_feeder")

API_VERSION = "2024-07-01.20.0"
SCOPE = "https://batch.core.windows.net/.default"
"""Token scope of the Batch service in the public cloud; ``DAGQ_BATCH_SCOPE`` overrides it
(e.g. ``https://batch.chinacloudapi.cn/.default``)."""
MAX_PER_CALL = 100  # Batch's limit for one add-task-collection request


def tasks_to_add(backlog: int, active: int, concurrency: int, max_tasks: int) -> int:
    """How many worker tasks to add so that ``ceil(backlog / concurrency)`` (at most
    ``max_tasks``) are active; never negative."""
    wanted = min(max_tasks, math.ceil(max(backlog, 0) / max(concurrency, 1)))
    return max(0, wanted - active)


@dataclass
class BatchJob:
    """The Batch service endpoints of one job, with a bearer-token source."""

    batch_url: str
    """Account endpoint, e.g. ``https://myacct.westeurope.batch.azure.com``."""
    job_id: str
    """The job the worker tasks are added to."""
    token: Callable[[], str]
    """Returns a bearer token for the Batch service."""
    timeout_s: float = 30.0
    """Per-request timeout."""

    def _request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.token()}",
                   "Content-Type": "application/json; odata=minimalmetadata"}
        try:
            resp = requests.request(method, url, headers=headers, timeout=self.timeout_s,
                                    **kwargs)
        except requests.RequestException as exc:
            raise StoreUnavailable(f"cannot reach the Batch account {self.batch_url}: {exc}"
                                   ) from None
        if resp.status_code >= 400:
            raise StoreUnavailable(
                f"Batch answered {resp.status_code} for {method} {url}: {resp.text[:300]} "
                "(check --batch-url, --job and that the identity may manage the job's tasks)")
        return resp

    def _url(self, path: str) -> str:
        return f"{self.batch_url.rstrip('/')}/jobs/{self.job_id}/{path}"

    def active_tasks(self) -> int:
        """Tasks of the job that have not completed (active, preparing or running)."""
        count = 0
        url: str | None = self._url("tasks")
        params: dict[str, str] | None = {"api-version": API_VERSION, "$select": "id",
                                         "$filter": "state ne 'completed'"}
        while url:
            body = self._request("GET", url, params=params).json()
            count += len(body.get("value", []))
            url, params = body.get("odata.nextLink"), None  # the link carries its query
        return count

    def add_tasks(self, template: dict[str, Any], n: int, stamp: str) -> list[str]:
        """Add ``n`` copies of ``template`` with fresh ids; returns the ids Batch accepted.

        The call answers 200 even when it rejects tasks: each task has its own ``status``
        (``success``, ``clientError`` or ``serverError``), so only the successes count
        (https://learn.microsoft.com/rest/api/batchservice/task/add-collection). Rejected
        tasks are logged with Batch's reason; if none was accepted, ``StoreUnavailable``.
        """
        ids: list[str] = []
        failures: list[str] = []
        for start in range(0, n, MAX_PER_CALL):
            batch = []
            for i in range(start, min(n, start + MAX_PER_CALL)):
                task = copy.deepcopy(template)
                task["id"] = task_id(stamp, i)
                batch.append(task)
            resp = self._request("POST", self._url("addtaskcollection"),
                                 params={"api-version": API_VERSION},
                                 data=json.dumps({"value": batch}))
            for result in _results(resp):
                if result.get("status") == "success":
                    ids.append(str(result.get("taskId")))
                else:
                    failures.append(f"{result.get('taskId')}: {result.get('status')} "
                                    f"{_reason(result.get('error'))}".rstrip())
        for failure in failures:
            log.warning("Batch rejected worker task %s", failure)
        if failures and not ids:
            raise StoreUnavailable(f"Batch accepted none of the {n} worker task(s): "
                                   f"{failures[0]}")
        return ids


def task_id(stamp: str, index: int) -> str:
    """A worker task id that no other round or feeder repeats: time, a random part and the
    index (Batch task ids: letters, digits, ``-`` and ``_``, at most 64 characters)."""
    return f"worker-{stamp}-{uuid.uuid4().hex[:12]}-{index:03d}"


def _reason(error: object) -> str:
    """``code: message`` of a Batch error body (its message is ``{lang, value}``)."""
    if not isinstance(error, dict):
        return ""
    message = error.get("message")
    text = message.get("value", "") if isinstance(message, dict) else str(message or "")
    return f"{error.get('code', '')}: {text}" if text else str(error.get("code", ""))


def _results(resp: requests.Response) -> list[dict[str, Any]]:
    try:
        body = resp.json()
    except ValueError:
        raise StoreUnavailable("Batch answered add-task-collection without a JSON body"
                               ) from None
    value = body.get("value") if isinstance(body, dict) else None
    return [r for r in value if isinstance(r, dict)] if isinstance(value, list) else []


def feed_once(queue: Queue, job: BatchJob, template: dict[str, Any], *, concurrency: int,
              max_tasks: int, now: float) -> tuple[int, int, int]:
    """One round: returns ``(backlog, active tasks, tasks added)``."""
    backlog = queue.approximate_count()
    active = job.active_tasks()
    n = tasks_to_add(backlog, active, concurrency, max_tasks)
    added = 0
    if n:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
        added = len(job.add_tasks(template, n, stamp))
        log.info("queue %s: %d waiting, %d worker tasks active: added %d of %d", queue.name,
                 backlog, active, added, n)
    return backlog, active, added


def load_template(path: str) -> dict[str, Any]:
    """The worker task body (``workers/deploy/batch/task.json``); ``ConfigError`` if bad."""
    try:
        with open(path) as f:
            template = json.load(f)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--task-file {path}: cannot read a JSON task body: {exc}") from None
    if not isinstance(template, dict) or "commandLine" not in template:
        raise ConfigError(f"--task-file {path}: a Batch task body needs a 'commandLine' "
                          "(see workers/deploy/batch/task.json)")
    return template


def default_token() -> Callable[[], str]:
    """Bearer tokens for the Batch service from ``DefaultAzureCredential``."""
    from azure.identity import DefaultAzureCredential

    credential = DefaultAzureCredential()
    scope = os.environ.get("DAGQ_BATCH_SCOPE") or SCOPE
    return lambda: credential.get_token(scope).token

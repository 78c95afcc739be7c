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
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests

from dagq.errors import ConfigError, StoreUnavailable
from dagq.ports import Queue

log = logging.getLogger("dagq.batch_feeder")

API_VERSION = "2024-07-01.20.0"
SCOPE = "https://batch.core.windows.net/.default"
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
        """Add ``n`` copies of ``template`` with fresh ids; returns the ids."""
        ids: list[str] = []
        for start in range(0, n, MAX_PER_CALL):
            batch = []
            for i in range(start, min(n, start + MAX_PER_CALL)):
                task = copy.deepcopy(template)
                task["id"] = f"worker-{stamp}-{i:03d}"
                batch.append(task)
            self._request("POST", self._url("addtaskcollection"),
                          params={"api-version": API_VERSION},
                          data=json.dumps({"value": batch}))
            ids += [t["id"] for t in batch]
        return ids


def feed_once(queue: Queue, job: BatchJob, template: dict[str, Any], *, concurrency: int,
              max_tasks: int, now: float) -> tuple[int, int, int]:
    """One round: returns ``(backlog, active tasks, tasks added)``."""
    backlog = queue.approximate_count()
    active = job.active_tasks()
    n = tasks_to_add(backlog, active, concurrency, max_tasks)
    if n:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
        job.add_tasks(template, n, stamp)
        log.info("queue %s: %d waiting, %d worker tasks active: added %d", queue.name,
                 backlog, active, n)
    return backlog, active, n


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
    return lambda: credential.get_token(SCOPE).token

"""``WorkflowAPI``: what the CLI asks of a client, met both by ``WorkflowClient`` (on a
store) and by ``dagq.remote.Client`` (over HTTP).

A command written against this protocol works with ``dagq --api URL`` as well as on a
store; ``dagq.cli.workflows.open_client`` returns the one the flags ask for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from dagq.core.model import WorkflowDef
from dagq.protocol.http import Submitted
from dagq.views.task_details import LogRead
from dagq.views.task_rows import TaskPage


class WorkflowAPI(Protocol):
    """Submit, inspect, wait for, cancel and retry workflows; read what tasks left."""

    def submit(self, defn: WorkflowDef, *, workflow_id: str | None = None,
               max_fan_in: int | None = None,
               params: Mapping[str, Any] | None = None) -> Submitted:
        """Submit a validated definition (idempotent with ``workflow_id``) with run
        parameters ``params``."""
        ...

    def status(self, workflow_id: str) -> dict[str, Any]:
        """The summary ``dagq status --json`` prints, children included."""
        ...

    def summary(self, workflow_id: str) -> dict[str, Any]:
        """The workflow's summary without children."""
        ...

    def wait(self, workflow_id: str, timeout_s: float | None = None, *,
             interval_s: float = 1.0) -> dict[str, Any]:
        """``status`` once terminal or when ``timeout_s`` has passed."""
        ...

    def list_workflows(self, status: str | None = None, limit: int | None = None, *,
                       since: float | None = None,
                       name: str | None = None) -> list[dict[str, Any]]:
        """Workflow summaries, newest first, filtered by status, creation time and name."""
        ...

    def explain(self, workflow_id: str, task: str | None = None) -> list[dict[str, Any]]:
        """Why each task (or ``task``) is where it is."""
        ...

    def graph(self, workflow_id: str) -> dict[str, Any]:
        """The run's graph model: tasks, dependencies, statuses and phases."""
        ...

    def task(self, workflow_id: str, task: str) -> dict[str, Any]:
        """One task's summary with its attempt history."""
        ...

    def logs(self, workflow_id: str, task: str, attempt: int | None = None,
             offset: int = 0, limit: int | None = None, follow: bool = False) -> LogRead:
        """What an attempt of ``task`` printed, from byte ``offset``."""
        ...

    def tasks(self, workflow_id: str, *, prefix: str | None = None, status: str | None = None,
              queue: str | None = None, offset: int = 0, limit: int | None = None,
              expand: bool = False) -> list[dict[str, Any]]:
        """Task summaries matching the filters (from ``offset``, at most ``limit``)."""
        ...

    def task_page(self, workflow_id: str, *, prefix: str | None = None,
                  status: str | None = None, queue: str | None = None, offset: int = 0,
                  limit: int | None = None, attention_first: bool = False,
                  expand: bool = False) -> TaskPage:
        """A page of task summaries, how many matched and the counts over every task."""
        ...

    def output(self, workflow_id: str, task: str) -> Any:
        """A task's output (``None`` if none)."""
        ...

    def files(self, workflow_id: str, task: str) -> list[dict[str, Any]]:
        """``[{"path","size","md5"}]`` of the files a task synced."""
        ...

    def file(self, workflow_id: str, task: str, path: str) -> bytes:
        """One synced file, MD5-checked."""
        ...

    def download_files(self, workflow_id: str, task: str, dest: Path) -> list[Path]:
        """Write a task's synced files under ``dest``."""
        ...

    def cancel(self, workflow_id: str, *, reason: str | None = None) -> object:
        """Request cancellation (``reason`` is kept with the workflow)."""
        ...

    def retry(self, workflow_id: str, *, tasks: Sequence[str] = ()) -> str:
        """Retry failed tasks (or ``tasks`` and the tasks after them); the request id."""
        ...

    def suspend(self, workflow_id: str, suspended: bool = True) -> object:
        """Stop starting tasks (``suspended=False``: start them again)."""
        ...

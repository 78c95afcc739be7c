"""The all-in-one local runtime behind ``dagq run``: a coordinator and workers in threads."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from dagq.config import Settings
from dagq.core.model import WorkflowDef
from dagq.ports import Backend, ChildWorkflows
from dagq.protocol import names
from dagq.runtime.coordinator import Coordinator
from dagq.worker.builtin import default_processors, load_processor
from dagq.worker.runtime import Worker

log = logging.getLogger("dagq.run")


def queues_of(defn: WorkflowDef) -> set[str]:
    """Every queue a workflow (and its inline child workflows) dispatches to."""
    out: set[str] = set()
    for t in defn.tasks:
        if t.merge:
            continue
        if t.workflow is not None:
            if t.workflow.definition is not None:
                out |= queues_of(t.workflow.definition)
            continue
        out.add(defn.queue_of(t))
    return out


class LocalRuntime:
    """A coordinator and one worker pool per queue, in threads of this process."""

    def __init__(self, backend: Backend, settings: Settings, queues: set[str], workers: int,
                 *, children: ChildWorkflows, processors: tuple[str, ...] = ()) -> None:
        """``workers`` slots per queue; ``children`` submits child workflows."""
        self.stop = threading.Event()
        self.coordinator = Coordinator(backend, settings, children=children)
        self.workers = [
            Worker(backend, settings, q, concurrency=workers,
                   processors=[load_processor(p) for p in processors] + default_processors())
            for q in sorted(queues)]
        self.threads = [threading.Thread(target=self.coordinator.run, args=(self.stop,),
                                         name="dagq-coordinator", daemon=True)]
        self.threads += [threading.Thread(target=w.run, kwargs={"install_signals": False},
                                          name=f"dagq-worker-{w.queue_name}", daemon=True)
                         for w in self.workers]

    def only(self, workflow_ids: Iterable[str]) -> None:
        """Before ``start``: the workers take only the tasks of ``workflow_ids`` and of
        their child workflows, never other workflows' tasks waiting on the same queues of
        the store. The embedded store filters in its receive query (nothing else is
        delivered, so nothing is released again and again); a queue that cannot filter
        is served whole, with a warning."""
        prefixes = [p for wf in workflow_ids for p in names.task_id_prefixes(wf)]
        for w in self.workers:
            narrow = getattr(w.queue, "only", None)
            if narrow is None:
                log.warning("queue %r of this store cannot be filtered: the workers of dagq "
                            "run may also run other workflows' tasks queued on it",
                            w.queue_name)
                continue
            w.queue = narrow(prefixes)

    def start(self) -> None:
        """Start every thread."""
        for t in self.threads:
            t.start()

    def stop_workflow(self, workflow_id: str) -> None:
        """Stop the tasks of ``workflow_id`` running here at once (SIGTERM to their trees)."""
        for w in self.workers:
            w.stop_workflow(workflow_id)

    def close(self, deadline_s: float = 10.0) -> None:
        """Stop workers (releasing what they run) and the coordinator, waiting at most
        ``deadline_s`` for their threads (a message left behind reappears later)."""
        for w in self.workers:
            w.shutdown()
        self.stop.set()
        end = time.monotonic() + deadline_s
        for t in self.threads:
            t.join(timeout=max(0.0, end - time.monotonic()))

"""The worker: takes task messages from one queue and runs them with N slots.

For each message: decode, claim it (the claim also announces it: see
``dagq.protocol.heartbeats``), check that the attempt may start (``gate``: dropped if its
workflow was cancelled or it is no longer current), write the inputs file, run the task
through a processor, publish its output (inline up to 32 KB, else in output storage),
send the completion, then delete the message. A monitor thread keeps running messages
invisible (until their tasks have exited, also while draining), polls the cancel
requests once per interval and writes heartbeats. SIGTERM stops taking work, stops
running tasks and releases their messages so another worker takes them at once.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from dagq.config import Settings
from dagq.crashpoints import crash_point
from dagq.errors import BadMessage, DagqError, NotFound, StoreUnavailable
from dagq.outage import TRANSIENT, Outage, retrying
from dagq.ports import Backend, Message, Queue
from dagq.protocol import cache, names
from dagq.protocol.cancels import prune_cancel_hints
from dagq.protocol.messages import CompletionMessage, TaskMessage, decode_task
from dagq.protocol.outputs import expand
from dagq.worker import claims, gpu, podcost, preemption, publish
from dagq.worker.attempt_tracking import AttemptTracker
from dagq.worker.bands import BandedQueue
from dagq.worker.builtin import default_processors
from dagq.worker.dirsync import finish_task_sync, start_task_sync, synced_prefixes
from dagq.worker.environment import task_context, task_env
from dagq.worker.gate import Gate, stop
from dagq.worker.heartbeat import Heartbeat, prune
from dagq.worker.held import Held
from dagq.worker.history import HistoryWriter
from dagq.worker.liveness import Liveness, liveness_path
from dagq.worker.poison import give_up
from dagq.worker.processors import Outcome, Processor, TaskContext, run_with
from dagq.worker.workdirs import discard_workdir, new_workdir, remove_pending_workdirs

log = logging.getLogger("dagq.worker")

RECHECK_S = 0.5
"""Next cancel poll after a hint its workflow's state did not confirm yet."""
T = TypeVar("T")


class Worker:
    """Runs tasks from ``queue_name`` with ``concurrency`` slots until stopped or idle."""

    def __init__(
        self,
        backend: Backend,
        settings: Settings,
        queue_name: str,
        *,
        concurrency: int = 1,
        processors: list[Processor] | None = None,
        gpus_per_task: int = 0,
        gpus: list[str] | None = None,
        idle_timeout: float | None = None,
        log_dir: Path | None = None,
        max_tasks: int | None = None,
    ) -> None:
        self.backend = backend
        self.settings = settings
        self.queue_name = queue_name
        self.queue: Queue = BandedQueue(backend.queues, queue_name)  # with its priority bands
        self.completions = backend.queues.get(names.COMPLETIONS)
        self.processors = processors or default_processors()
        self.gpus_per_task = gpus_per_task
        self.gpu_pool = gpu.worker_pool(gpus_per_task, gpus, concurrency)
        self.gpu_health = gpu.HealthGate(self.gpu_pool, settings.gpu_health_interval)
        self.concurrency = max(1, concurrency)
        self.idle_timeout = idle_timeout
        self.max_tasks, self._taken = max_tasks, 0
        self.pod_cost = podcost.from_env()
        self.log_dir = log_dir or Path(tempfile.gettempdir()) / "dagq-logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{queue_name}"
        self.stats: Counter[str] = Counter()
        self._running: dict[str, Held] = {}
        self._claiming: dict[str, int] = {}
        """Keys being claimed now (by how many slots), listed in heartbeats as running."""
        self._lock = threading.Lock()
        self._shutdown = threading.Event()
        self._slots_done = threading.Event()
        self._last_active = time.monotonic()
        self.heartbeat = Heartbeat(backend.records, self.worker_id, queue_name,
                                   settings.heartbeat_interval)
        self._beat_lock = threading.Lock()
        self.gate = Gate(backend, self.completions, self.worker_id, self.stats)
        self.heartbeat.health = self.gpu_health.problem
        self.claims = claims.Claims(backend.records, self.worker_id, self.heartbeat.started_at,
                                    settings.heartbeat_interval)
        self.dirsync_interval = settings.dirsync_interval
        self.liveness = Liveness(liveness_path(queue_name, settings.store), self.worker_id)
        self._task_env = task_env(settings)
        self.history = HistoryWriter(backend.records)
        self._renewals = Outage(f"lease renewal on queue {queue_name!r}", log)

    # -- lifecycle ---------------------------------------------------------------------
    def run(self, install_signals: bool = True) -> int:
        """Work until shut down (SIGTERM/SIGINT, ``shutdown()`` or idle timeout)."""
        if install_signals and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: self.shutdown())
            signal.signal(signal.SIGINT, lambda *_: self.shutdown())
        started = time.monotonic()
        prune(self.backend.records, time.time())
        self.history.start()
        prune_cancel_hints(self.backend.records, time.time())
        claims.prune(self.backend.records, time.time())
        self._announce()
        slots = [threading.Thread(target=self._slot, name=f"dagq-slot-{i}", daemon=True)
                 for i in range(self.concurrency)]
        monitor = threading.Thread(target=self._monitor, name="dagq-monitor", daemon=True)
        for t in [*slots, monitor]:
            t.start()
        self.liveness.watch([*slots, monitor])
        notices = preemption.watch(self.settings.scheduled_events_url, self.settings.vm_name,
                                   self.settings.kill_timeout, self.shutdown)
        for t in slots:
            t.join()
        self._shutdown.set()
        self._slots_done.set()
        monitor.join(timeout=5)
        remove_pending_workdirs()
        self.history.stop()
        self.heartbeat.stop()
        self.liveness.stop()
        if notices is not None:
            notices.stop()
        log.info("worker %s stopped after %.1fs: %s", self.worker_id,
                    time.monotonic() - started, self.summary())
        return 0

    def shutdown(self) -> None:
        """Stop taking work, stop running tasks and release their messages."""
        self._shutdown.set()
        with self._lock:
            for r in self._running.values():
                r.stop.set()

    def stop_workflow(self, workflow_id: str) -> int:
        """Stop, as cancelled, the attempts of ``workflow_id`` running here; how many."""
        with self._lock:
            hit = [r for r in self._running.values() if r.task.workflow_id == workflow_id]
        for r in hit:
            stop(r)
        return len(hit)

    def summary(self) -> str:
        """One line: tasks by outcome."""
        keys = ("succeeded", "failed", "cancelled", "released", "dropped", "bad_messages",
                "duplicates_dropped")
        return ", ".join(f"{k}={self.stats[k]}" for k in keys)

    def running_tasks(self) -> list[str]:
        """Keys of the tasks running now (and of claims not yet given back)."""
        with self._lock:
            return sorted({*self._running, *self._claiming, *self.claims.pending()})

    # -- slots -------------------------------------------------------------------------
    def _slot(self) -> None:
        backoff = 0.05
        outage = Outage(f"worker slot on queue {self.queue_name!r}", log)
        while not self._shutdown.is_set():
            if self.gpu_health.blocked(self._shutdown):
                continue
            try:
                # the backend long-polls: a message arriving mid-wait is taken at once
                msgs = self.queue.receive(1, self.settings.visibility_timeout, wait_s=backoff)
            except DagqError as exc:  # a store outage must not cost the worker a slot
                self._shutdown.wait(max(outage.failed(exc), 0.5))
                continue
            outage.ok()
            if not msgs:
                backoff = min(backoff * 2, max(self.settings.max_idle_backoff, 0.05))
                if self._idle_expired():
                    self._shutdown.set()
                continue
            backoff = 0.05
            self._touch()
            if self._shutdown.is_set():
                self.queue.release(msgs[0])
                break
            try:
                self._handle(msgs[0])
            except Exception:  # the message reappears after its visibility timeout
                log.exception("handling %s failed; it will be delivered again", msgs[0].id)
            self._touch()
            self._taken += 1
            if self.max_tasks is not None and self._taken >= self.max_tasks:
                self._shutdown.set()  # e.g. one Job per message: take no more

    def _touch(self) -> None:
        self._last_active = time.monotonic()

    def _idle_expired(self) -> bool:
        if self.idle_timeout is None:
            return False
        with self._lock:
            busy = bool(self._running)
        return not busy and time.monotonic() - self._last_active >= self.idle_timeout

    def _handle(self, msg: Message) -> None:
        try:
            task = decode_task(msg.body)
        except BadMessage as exc:
            log.warning("dead-lettering malformed task message %s: %s", msg.id, exc)
            self.queue.dead_letter(msg, str(exc))
            self.stats["bad_messages"] += 1
            return
        running_here = task.key in self.running_tasks()
        with self._lock:  # listed by any heartbeat that starts after the claim is written
            self._claiming[task.key] = self._claiming.get(task.key, 0) + 1
        try:
            claimed = claims.admit(self.claims, self.queue, self.backend.states, msg, task,
                                   running_here=running_here, stats=self.stats,
                                   stopping=self._shutdown,
                                   visibility_s=self.settings.visibility_timeout)
            if claimed is None:
                return
            msg = claimed
            task = expand(self.backend, task)
            if msg.delivery_count >= self.settings.max_deliveries:
                give_up(self.queue, self.completions, msg, task, self.worker_id,
                        self.settings.max_deliveries, self.stats)
                return
            run = Held(msg, task, hidden_until=time.monotonic()
                           + self.settings.visibility_timeout)
            with self._lock:
                self._running[task.key] = run
        finally:
            with self._lock:
                left = self._claiming.pop(task.key) - 1
                if left:
                    self._claiming[task.key] = left
        try:
            # the claim, written before this check, announced the attempt: a cancel that
            # finds no live claim for it knows this check will see the cancel
            # (dagq.protocol.heartbeats, dagq.runtime.control)
            verdict = self.gate.check(task)
            if verdict != "run":
                self.gate.refuse(task, verdict)
                self.queue.delete(run.end_lease())
                return
            self._execute(run)
        except BaseException:  # let another worker (or this one) run it again
            self.claims.give_back(task.key)
            raise
        finally:
            with self._lock:
                self._running.pop(task.key, None)

    def _announce(self) -> bool:
        """Write the heartbeat with the attempts held now (one writer at a time, so an
        older list never overwrites a newer one)."""
        with self._beat_lock:
            seen = time.time()  # before the list: a claim older than this is in it
            return self.heartbeat.beat(self.running_tasks(), seen_at=seen)

    def _execute(self, run: Held) -> None:
        task = run.task
        workdir = new_workdir()
        gpus: list[str] | None = None
        tracker: AttemptTracker | None = None
        try:
            outcome: Outcome | None = None
            try:
                gpus = gpu.take(self.gpu_pool, task.kwargs, self.gpus_per_task)
                ctx = self._context(run, workdir, gpus)
            except StoreUnavailable:
                raise
            except DagqError as exc:  # e.g. a corrupt or missing upstream output
                ctx = self._context(run, workdir, gpus, resolve=False)
                outcome = Outcome(False, f"could not prepare the task: {exc}")
            tracker = AttemptTracker(self.backend, self.settings, self.worker_id, task,
                                     ctx.log_path, self.history)
            tracker.start()
            if outcome is None:
                sync = start_task_sync(self.backend.outputs, task.kwargs, task.workflow_id,
                                       task.task, task.key, self.dirsync_interval)
                try:
                    outcome = run_with(self.processors, ctx)
                finally:
                    if sync is not None:
                        finish_task_sync(sync, self.stats)
            if outcome.stopped and self._shutdown.is_set() and not run.cancelled:
                tracker.end(outcome, released=True)
                self.claims.give_back(task.key)
                self.queue.release(run.end_lease())
                self.stats["released"] += 1
                log.info("released %s for another worker (shutting down)", task.key)
                return
            if run.cancelled:
                outcome = replace(outcome, success=False, stopped=True,
                                  error="cancelled: the workflow was cancelled")
            completion, body = self._publish(task, outcome, ctx, tracker.elapsed())
            if task.cache is not None:  # a task that uses the cache: store its result
                cache.remember(self.backend, task, completion, time.time(),
                               synced_prefixes(task.kwargs, task.workflow_id, task.task))
            tracker.end(replace(outcome, success=completion.success, error=completion.error),
                        cancelled=run.cancelled)
            crash_point("worker_before_complete")
            self._until_sent(lambda: self.completions.send(
                body, message_id=names.done_id(task.key),
                session_id=names.session_id(task.workflow_id)))
            crash_point("worker_after_complete")
            self.queue.delete(run.end_lease())
            self.stats["cancelled" if run.cancelled else
                       "succeeded" if completion.success else "failed"] += 1
        finally:
            if tracker is not None:  # the worker failed around the task: still end its log
                tracker.end(Outcome(False, "the worker could not finish handling the attempt"))
            if gpus and self.gpu_pool is not None:
                self.gpu_pool.release(gpus)
            discard_workdir(workdir)

    def _context(self, run: Held, workdir: Path, gpus: list[str] | None,
                 resolve: bool = True) -> TaskContext:
        return task_context(self.backend, run.task, workdir, gpus, env=self._task_env,
                            log_dir=self.log_dir, stop=run.stop,
                            kill_timeout=self.settings.kill_timeout, resolve=resolve)

    def _publish(self, task: TaskMessage, outcome: Outcome, ctx: TaskContext,
                 duration_s: float | None = None) -> tuple[CompletionMessage, bytes]:
        limit = self.completions.max_message_bytes
        args = (task, outcome.success, outcome.error, ctx.output_file, self.worker_id, limit)
        try:
            return self._until_sent(lambda: publish.completion(self.backend, *args,
                                                               duration_s=duration_s))
        except TRANSIENT:
            raise
        except Exception as exc:
            log.exception("%s: could not publish the result", task.key)
            return publish.completion(self.backend, task, False, (
                f"the worker could not publish the task's result: {exc!r}"), Path("/"),
                self.worker_id, limit)

    def _until_sent(self, call: Callable[[], T]) -> T:
        """``call()``, riding out a store outage for up to ``visibility_timeout`` * 10 s
        while the monitor keeps the task's message hidden (so the task is not re-run)."""
        return retrying(call, Outage(f"worker {self.worker_id}", log), self._shutdown.wait,
                        self.settings.visibility_timeout * 10)

    # -- monitor -----------------------------------------------------------------------
    def _monitor(self) -> None:
        vis = self.settings.visibility_timeout
        next_beat = time.monotonic() + self.heartbeat.interval
        next_poll = time.monotonic() + self.settings.cancel_poll_interval
        # runs until the slots are done, not just until shutdown: a draining task keeps
        # its message hidden for as long as it takes to honour SIGTERM
        while not self._slots_done.wait(0.2):
            now = time.monotonic()
            with self._lock:
                running = list(self._running.values())
            for r in running:  # renew once a third of the lease is used: two thirds of
                if now > r.hidden_until - vis * 2 / 3:  # it are the margin for a slow store
                    self._extend(r, now)
            if now >= next_poll:
                next_poll = now + self.settings.cancel_poll_interval
                if running and self.gate.poll(running):
                    next_poll = now + min(RECHECK_S, self.settings.cancel_poll_interval)
            if now >= next_beat:
                next_beat = now + self.heartbeat.interval
                self.claims.retry()
                if self.pod_cost is not None:
                    self.pod_cost.update(len(running))
                self._announce()

    def _extend(self, r: Held, now: float) -> None:
        try:
            with r.lease:
                if r.finished:
                    return
                r.message = self.queue.extend(r.message, self.settings.visibility_timeout)
                r.hidden_until = now + self.settings.visibility_timeout
        except NotFound:
            log.warning("lost the lease on %s; another worker may run it too", r.task.key)
        except TRANSIENT as exc:  # one line when it starts, then one a minute
            self._renewals.failed(exc)
        except DagqError as exc:
            log.warning("could not extend %s: %s", r.task.key, exc)
        else:
            self._renewals.ok()

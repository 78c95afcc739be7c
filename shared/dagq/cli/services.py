"""Long-running commands and diagnostics: coordinator, worker, doctor."""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import threading
import time

import click

from dagq.cli.common import (
    emit_json,
    handle_errors,
    iso_time,
    piped,
    refuse_remote,
    settings_from,
    store_option,
)
from dagq.cli.render import print_lines, print_table
from dagq.client import WorkflowClient
from dagq.ops.doctor import diagnose
from dagq.ports import Backend
from dagq.runtime.coordinator import Coordinator
from dagq.wiring import backend_from_settings
from dagq.worker import liveness, proctree
from dagq.worker.builtin import default_processors, load_processor
from dagq.worker.eventlog import configure_events
from dagq.worker.gpu import shares
from dagq.worker.heartbeat import check_local
from dagq.worker.pool import ProcessPool
from dagq.worker.runtime import Worker


def write_stats(role: str, backend: Backend, counts: dict[str, int]) -> None:
    """Append this process's request counts and peak memory to ``$DAGQ_STATS_FILE``."""
    path = os.environ.get("DAGQ_STATS_FILE")
    if not path:
        return
    record = {"role": role, "pid": os.getpid(), "requests": backend.stats.snapshot(),
              "counts": counts,
              "max_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


@click.command()
@click.option("--batch-size", type=click.IntRange(min=1), default=None,
              help="Completions per receive [DAGQ_BATCH_SIZE, 32].")
@click.option("--visibility-timeout", type=float, default=None,
              help="Seconds a received completion stays hidden [DAGQ_VISIBILITY_TIMEOUT, 60].")
@click.option("--idle-poll", type=float, default=None,
              help="Longest empty-queue wait in seconds [DAGQ_IDLE_POLL, 0.5].")
@click.option("--sweep-interval", type=float, default=None,
              help="Seconds between repair sweeps [DAGQ_SWEEP_INTERVAL, 10].")
@click.option("--outbox-grace", type=float, default=None,
              help="Age at which unsent dispatches are re-sent [DAGQ_OUTBOX_GRACE, 30].")
@click.option("--outbox-flush", type=float, default=None,
              help="Idle delay before sent dispatches are cleared [DAGQ_OUTBOX_FLUSH, 1].")
@click.option("--stale-pending", type=float, default=None,
              help="Age at which a never-started workflow is started [DAGQ_STALE_PENDING, 120].")
@click.option("--timeout-grace", type=float, default=None,
              help="Slack before an overdue attempt is failed [DAGQ_TIMEOUT_GRACE, 60].")
@click.option("--max-deliveries", type=click.IntRange(min=1), default=None,
              help="Deliveries before a message is dead-lettered [DAGQ_MAX_DELIVERIES, 10].")
@click.option("--metrics-port", type=click.IntRange(min=0, max=65535), default=None,
              help="Serve Prometheus metrics on 127.0.0.1:PORT/metrics [DAGQ_METRICS_PORT]; "
                   "see docs/metrics.md.")
@store_option
@click.pass_context
@handle_errors
def coordinator(ctx: click.Context, batch_size: int | None, visibility_timeout: float | None,
                idle_poll: float | None, sweep_interval: float | None,
                outbox_grace: float | None, outbox_flush: float | None,
                stale_pending: float | None, timeout_grace: float | None,
                max_deliveries: int | None, metrics_port: int | None,
                store: str | None) -> None:
    """Apply task completions and dispatch ready tasks until SIGTERM/Ctrl-C."""
    settings = settings_from(ctx, store, batch_size=batch_size,
                             visibility_timeout=visibility_timeout, idle_poll=idle_poll,
                             sweep_interval=sweep_interval, outbox_grace=outbox_grace,
                             outbox_flush=outbox_flush, stale_pending=stale_pending,
                             timeout_grace=timeout_grace, max_deliveries=max_deliveries)
    backend = backend_from_settings(settings)
    coord = Coordinator(backend, settings, children=WorkflowClient(backend))
    _start_metrics(metrics_port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    click.echo(f"coordinator running on {settings.store}", err=True)
    started = time.monotonic()
    coord.run(stop)
    click.echo(f"coordinator stopped after {time.monotonic() - started:.1f}s: "
               f"{coord.stats.line()}", err=True)
    write_stats("coordinator", backend, dict(coord.stats.counts))


def _start_metrics(port: int | None) -> None:
    """Configure the optional metrics exporters (docs/metrics.md) and say where they go."""
    from dagq import metrics

    sink = metrics.configure(os.environ, port=port)
    server = getattr(sink, "server", None) or next(
        (getattr(s, "server", None) for s in getattr(sink, "sinks", [])), None)
    if server is not None:
        host, bound = server.server_address[:2]
        click.echo(f"metrics on http://{host}:{bound}/metrics", err=True)


@click.command()
@click.argument("queue", envvar="DAGQ_WORKER_QUEUE")
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True,
              envvar="DAGQ_WORKER_CONCURRENCY", help="Tasks run at once (in each process).")
@click.option("--processes", type=click.IntRange(min=1), default=1, show_default=True,
              envvar="DAGQ_WORKER_PROCESSES",
              help="Worker processes of --concurrency slots each, kept by one parent "
                   "(small Python-bound tasks scale past one interpreter; see docs/workers.md).")
@click.option("--max-tasks", type=click.IntRange(min=1), default=None, envvar="DAGQ_MAX_TASKS",
              help="Exit after handling this many messages (e.g. 1 in a Kubernetes Job).")
@click.option("--idle-timeout", type=float, default=None, envvar="DAGQ_IDLE_TIMEOUT",
              help="Exit after this many idle seconds [DAGQ_IDLE_TIMEOUT, never].")
@click.option("--max-idle-backoff", type=float, default=None,
              help="Upper bound of the empty-queue back-off [DAGQ_MAX_IDLE_BACKOFF, 2].")
@click.option("--cancel-poll-interval", type=float, default=None,
              help="Seconds between cancel-flag checks [DAGQ_CANCEL_POLL_INTERVAL, 2].")
@click.option("--kill-timeout", type=float, default=None,
              help="Seconds between SIGTERM and SIGKILL of a task [DAGQ_KILL_TIMEOUT, 600].")
@click.option("--gpus-per-task", type=click.IntRange(min=0), default=0,
              envvar="DAGQ_GPUS_PER_TASK", help="GPUs given to each task (CUDA_VISIBLE_DEVICES).")
@click.option("--gpus", default=None, help="GPU ids to use, e.g. 0,1,2,3 (default: detected).")
@click.option("--processor", "processors", multiple=True, metavar="MODULE:CLASS",
              help="Custom processor tried before the built-in ones (repeatable).")
@click.option("--check", is_flag=True,
              help="Liveness: exit 0 if this host's worker for QUEUE is alive (local file only).")
@click.option("--ready", is_flag=True,
              help="Readiness: exit 0 if this host's worker for QUEUE has a fresh heartbeat "
                   "in the store and healthy GPUs.")
@click.option("--log-format", type=click.Choice(["text", "json"]), default=None,
              help="Per-task log lines as text or JSON lines [DAGQ_LOG_FORMAT, text].")
@store_option
@click.pass_context
@handle_errors
def worker(ctx: click.Context, queue: str, concurrency: int, processes: int,
           max_tasks: int | None,
           idle_timeout: float | None,
           max_idle_backoff: float | None, cancel_poll_interval: float | None,
           kill_timeout: float | None, gpus_per_task: int, gpus: str | None,
           processors: tuple[str, ...], check: bool, ready: bool, log_format: str | None,
           store: str | None) -> None:
    """Run tasks from QUEUE until SIGTERM (running tasks are released to other workers);
    one log line per task start and end on stderr."""
    settings = settings_from(ctx, store, max_idle_backoff=max_idle_backoff,
                             cancel_poll_interval=cancel_poll_interval,
                             kill_timeout=kill_timeout, log_format=log_format)
    if check:  # never touches the store: a storage outage must not restart workers
        ok, why = liveness.check(liveness.liveness_path(queue, settings.store), time.time())
        click.echo(why, err=True)
        sys.exit(0 if ok else 1)
    if ready:
        backend = backend_from_settings(settings)
        ok = check_local(backend.records, queue, time.time(), settings.heartbeat_interval)
        click.echo("ready" if ok else f"no live, healthy worker for {queue!r} on this host",
                   err=True)
        sys.exit(0 if ok else 1)
    parts = shares([g.strip() for g in gpus.split(",") if g.strip()] if gpus else None,
                   processes, gpus_per_task, concurrency)
    procs = [load_processor(p) for p in processors] + default_processors()

    def run(index: int) -> int:
        configure_events(settings.log_format)
        backend = backend_from_settings(settings)
        w = Worker(backend, settings, queue, concurrency=concurrency, processors=procs,
                   gpus_per_task=gpus_per_task, gpus=parts[index],
                   idle_timeout=idle_timeout, max_tasks=max_tasks)
        click.echo(f"worker {w.worker_id} on queue {queue!r} with {w.concurrency} slot(s)",
                   err=True)
        proctree.enable_subreaper()  # orphaned task processes stay reachable and get reaped
        started = time.monotonic()
        code = w.run()
        click.echo(f"worker {w.worker_id} stopped after {time.monotonic() - started:.1f}s: "
                   f"{w.summary()}", err=True)
        write_stats("worker", backend, dict(w.stats))
        return code

    if processes == 1:
        sys.exit(run(0))
    click.echo(f"worker pool {os.getpid()}: {processes} processes x {concurrency} slot(s) "
               f"on queue {queue!r}", err=True)
    pool = ProcessPool(processes, handle_errors(run),
                       liveness.liveness_path(queue, settings.store),
                       echo=lambda line: click.echo(line, err=True))
    sys.exit(pool.run())


def _running(keys: object, show: int = 3) -> str:
    """``N: key, key, ...`` of the tasks a worker runs."""
    names = [str(k) for k in keys] if isinstance(keys, list) else []
    more = f", +{len(names) - show}" if len(names) > show else ""
    return f"{len(names)}" + (f": {', '.join(names[:show])}{more}" if names else "")


@click.command()
@click.option("--stale-pending", type=float, default=120.0, show_default=True,
              help="Flag pending workflows older than this many seconds.")
@click.option("--json", "as_json", is_flag=True,
              help='Print {"live_workers": {queue: [...]}, "problems": [...]}.')
@store_option
@click.pass_context
@handle_errors
def doctor(ctx: click.Context, stale_pending: float, as_json: bool, store: str | None) -> None:
    """Diagnose: stuck workflows, queues without workers, overdue tasks, dead letters.

    Exit 1 when it finds a problem. Piped, it prints tab-separated lines: ``worker QUEUE
    ID RUNNING LAST_SEEN`` and ``problem TEXT``."""
    refuse_remote(ctx, "dagq doctor")
    settings = settings_from(ctx, store)
    backend = backend_from_settings(settings)
    now = time.time()
    report = diagnose(backend, settings, now, stale_pending=stale_pending)
    for note in report.skipped:
        click.echo(f"SKIPPED {note}", err=True)
    if as_json:
        emit_json({"live_workers": report.workers, "problems": report.problems})
    elif piped():
        print_lines([["worker", q, w["id"], len(w.get("running") or []),  # type: ignore[arg-type]
                      iso_time(float(str(w["last_seen"])))]
                     for q, ws in sorted(report.workers.items()) for w in ws]
                    + [["problem", text] for text in report.problems])
    else:
        rows = [[q, w["id"], _running(w.get("running")),
                 f"{now - float(str(w['last_seen'])):.0f}s ago"]
                for q, ws in sorted(report.workers.items()) for w in ws]
        click.echo("live workers:")
        print_table(["queue", "worker", "running", "last seen"], rows) if rows \
            else click.echo("  none")
        for text in report.problems:
            click.echo(f"PROBLEM {text}")
    click.echo(f"{len(report.problems)} problem(s) found", err=True)
    sys.exit(1 if report.problems else 0)


COMMANDS = (coordinator, worker, doctor)
"""The commands this module adds to ``dagq``."""

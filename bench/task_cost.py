"""Per-task cost breakdown on the embedded SQLite store: what each step of one task's life
costs, in wall time, CPU time and store requests.

    .venv/bin/python bench/task_cost.py                      # chain of 200, fan-out of 1,000
    .venv/bin/python bench/task_cost.py --chain 50 --fanout 200 --profile-chain 50
    .venv/bin/python bench/task_cost.py --no-profile --json  # figures as one JSON document

A coordinator and one worker (``--slots`` slots) run as separate processes, as
``dagq coordinator`` and ``dagq worker default`` do, but started through this script
(``--serve``), which first wraps the functions that implement each step with timers
(``time.perf_counter_ns`` for wall time, ``time.thread_time_ns`` for CPU) and counts the
store requests each step makes (``RequestStats.add``, the SQLite backend's own request
counter). Nothing in ``dagq`` is changed: the wrappers exist only in those two processes.

A phase's time is its *self* time: the time in its function minus the time in the phases
nested inside it, so the phases of one task add up without double counting; the
``(glue)`` rows are what a container (the worker's ``_handle``/``_execute``, the
coordinator's ``step``/``commit_group``) spends outside the phases it contains. A call
that handles several tasks (a coordinator batch) is shared evenly among them. Work done
outside any task (idle polls, heartbeats, background history and log threads, sweeps) is
listed apart, per task of the run.

Each scenario runs a 5-task warm-up chain first, then the measured workflow, on a fresh
store and fresh processes; it is then run again with nothing installed, and that wall time
per task is printed beside the timed one (the difference is what the timers cost).

The optional profile pass runs one more chain with the worker's ``_handle`` under
``cProfile`` (one profiler per slot thread; no timers installed) and prints the 15
functions with the largest cumulative time per task.

Timestamps are taken with ``perf_counter_ns`` (``CLOCK_MONOTONIC``, one clock for every
process of the machine), so the chain's critical path is also split into its hops: waiting
in the task queue, the worker, waiting in the completion queue, the coordinator.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import datetime
import functools
import io
import itertools
import json
import os
import pstats
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "shared"))

from dagq.client import WorkflowClient  # noqa: E402
from dagq.config import Settings  # noqa: E402
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES, TaskDef, WorkflowDef  # noqa: E402
from dagq.wiring import backend_from_settings  # noqa: E402

CMD = {"cmd": "true"}

# -- phases ------------------------------------------------------------------------------

W_RECEIVE = "worker: receive (the query that took the message)"
W_DECODE = "worker: decode task message"
W_CLAIM = "worker: claim (create-only record)"
W_EXPAND = "worker: expand inputs"
W_ANNOUNCE = "worker: heartbeat announce"
W_GATE = "worker: gate check (state read, cached)"
W_WORKDIR = "worker: workdir mkdir"
W_CONTEXT = "worker: task context (inputs file, env)"
W_TRACKER_INIT = "worker: attempt tracker init"
W_TRACKER_START = "worker: tracker start (deferred capture and record)"
W_PROCESSOR = "worker: processor (glue)"
W_RUN_PROCESS = "worker: run_process (watchdog, proctree, tail)"
W_SPAWN = "worker: spawn (ask the spawn server, or start a supervisor)"
W_WAIT = "worker: process run (sh and the task, until exit)"
W_PUBLISH = "worker: publish output"
W_TRACKER_END = "worker: tracker end (record, log lines)"
W_LOG_FINISH = "worker: log capture finish (join, upload)"
W_LOG_PUT = "worker: log object put"
W_SEND = "worker: completion send"
W_DELETE = "worker: ack (delete task message)"
W_EXECUTE = "worker: _execute (glue)"
W_HANDLE = "worker: _handle (glue)"
C_RECEIVE = "coordinator: receive (the query that took it)"
C_DECODE = "coordinator: decode + group"
C_GROUP = "coordinator: commit_group (glue)"
C_READ = "coordinator: state read (cache miss)"
C_ETAG = "coordinator: state ETag check"
C_APPLY = "coordinator: engine apply"
C_WRITE = "coordinator: state encode (write_state glue)"
C_WRITE_SQL = "coordinator: state append/replace (store)"
C_DISPATCH = "coordinator: dispatch (build task messages)"
C_SEND_MANY = "coordinator: dispatch send_many (store)"
C_INDEX = "coordinator: index row update"
C_ACK = "coordinator: ack (delete_many)"
C_STEP = "coordinator: step (glue)"
RECEIVE_WAIT = "receive: long-poll wait"
IDLE_QUERY = "receive: empty poll query"
BG_HISTORY = "history writer flush (thread)"
BG_LOG_POLL = "log capture poll (thread)"
BG_RMTREE = "workdir removal (pacer thread, off the slot's path)"
BG_FLUSH = "coordinator flush (outbox, index)"
BG_SWEEP = "coordinator sweep"
OUTSIDE = "(no phase: start-up, monitor, controls)"

ORDER = [W_RECEIVE, W_DECODE, W_CLAIM, W_EXPAND, W_ANNOUNCE, W_GATE, W_WORKDIR, W_CONTEXT,
         W_TRACKER_INIT, W_TRACKER_START, W_PROCESSOR, W_RUN_PROCESS, W_SPAWN, W_WAIT,
         W_PUBLISH, W_TRACKER_END, W_LOG_FINISH, W_LOG_PUT, W_SEND, W_DELETE,
         W_EXECUTE, W_HANDLE, C_RECEIVE, C_DECODE, C_GROUP, C_READ, C_ETAG, C_APPLY, C_WRITE,
         C_WRITE_SQL, C_DISPATCH, C_SEND_MANY, C_INDEX, C_ACK, C_STEP]


# -- the recorder (in the --serve processes) ---------------------------------------------

class _Frame:
    __slots__ = ("child_cpu", "child_wall", "phase")

    def __init__(self, phase: str) -> None:
        self.phase = phase
        self.child_wall = 0
        self.child_cpu = 0


class Recorder:
    """Phase times and store requests of one process, by task key or as background."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.lock = threading.Lock()
        # key -> phase -> [wall_ns, cpu_ns, requests, calls]
        self.per_key: dict[str, dict[str, list[float]]] = defaultdict(
            lambda: defaultdict(lambda: [0.0, 0.0, 0.0, 0.0]))
        # phase -> [wall_ns, cpu_ns, requests, calls] of work outside any task
        self.background: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
        self.kinds_keyed: dict[str, float] = defaultdict(float)
        self.kinds_background: dict[str, float] = defaultdict(float)
        self.events: dict[str, dict[str, int]] = defaultdict(dict)
        self.cpu_at: dict[str, tuple[float, float]] = {}

    # thread state
    def stack(self) -> list[_Frame]:
        st: list[_Frame] | None = getattr(self.local, "stack", None)
        if st is None:
            st = self.local.stack = []
        return st

    def keys(self) -> tuple[str, ...]:
        keys: tuple[str, ...] = getattr(self.local, "keys", ())
        return keys

    def set_keys(self, keys: tuple[str, ...]) -> None:
        self.local.keys = keys

    def event(self, key: str, name: str) -> None:
        with self.lock:
            self.events[key].setdefault(name, time.perf_counter_ns())

    def first_seen(self, workflow_id: str) -> None:
        """Note the process's CPU time when it first works for ``workflow_id``."""
        if workflow_id not in self.cpu_at:
            with self.lock:
                self.cpu_at.setdefault(workflow_id, _cpu_s())

    def add(self, phase: str, wall: int, cpu: int, *, calls: int = 1,
            keyed: bool = True) -> None:
        keys = self.keys() if keyed else ()
        with self.lock:
            if keys:
                share = 1.0 / len(keys)
                for k in keys:
                    row = self.per_key[k][phase]
                    row[0] += wall * share
                    row[1] += cpu * share
                    row[3] += calls * share
            else:
                row = self.background[phase]
                row[0] += wall
                row[1] += cpu
                row[3] += calls

    def request(self, kind: str, n: int = 1, phase: str | None = None,
                keyed: bool = True) -> None:
        if phase is None:
            st = self.stack()
            phase = st[-1].phase if st else OUTSIDE
        keys = self.keys() if keyed else ()
        with self.lock:
            if keys:
                share = n / len(keys)
                for k in keys:
                    self.per_key[k][phase][2] += share
                self.kinds_keyed[kind] += n
            else:
                self.background[phase][2] += n
                self.kinds_background[kind] += n

    def timed(self, phase: str | Callable[..., str], fn: Callable[..., Any],
              after: Callable[[Any, tuple[Any, ...]], None] | None = None,
              keyed: bool = True) -> Callable[..., Any]:
        """``fn`` timed as ``phase`` (a name, or a function of the call's arguments giving
        one); ``after(result, args)`` runs before the time is recorded (to set keys)."""
        rec = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            name = phase if isinstance(phase, str) else phase(*args, **kwargs)
            st = rec.stack()
            frame = _Frame(name)
            st.append(frame)
            c0 = time.thread_time_ns()
            t0 = time.perf_counter_ns()
            result: Any = None
            try:
                result = fn(*args, **kwargs)
                if after is not None:
                    after(result, args)
                return result
            finally:
                wall = time.perf_counter_ns() - t0
                cpu = time.thread_time_ns() - c0
                st.pop()
                if st:
                    st[-1].child_wall += wall
                    st[-1].child_cpu += cpu
                rec.add(name, wall - frame.child_wall, cpu - frame.child_cpu, keyed=keyed)

        functools.update_wrapper(wrapper, fn)
        return wrapper

    def dump(self, path: Path, role: str) -> None:
        self_ru = resource.getrusage(resource.RUSAGE_SELF)
        path.write_text(json.dumps({
            "role": role,
            "per_key": {k: dict(v) for k, v in self.per_key.items()},
            "background": dict(self.background),
            "kinds_keyed": dict(self.kinds_keyed),
            "kinds_background": dict(self.kinds_background),
            "events": dict(self.events),
            "cpu_at": self.cpu_at,
            "cpu_end": _cpu_s(),
            "max_rss_mb": self_ru.ru_maxrss / 1024,
        }))


def _set(owner: object, attr: str, value: object) -> None:
    """Replace ``owner.attr`` (in this process only)."""
    setattr(owner, attr, value)


def _get(owner: object, attr: str) -> Any:
    """``owner.attr``, typed ``Any``."""
    return getattr(owner, attr)


def _cpu_s() -> tuple[float, float]:
    """CPU seconds of this process and of its child processes: those it waited for, and
    its spawn servers with the tasks they waited for (``/proc/PID/stat``)."""
    from dagq.worker import spawner

    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    served = 0.0
    for srv in list(spawner._servers.values()):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{srv.pid}/stat").read_text().rpartition(")")[2].split()
            served += sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime + served


def _key_of(msg_id: str) -> str | None:
    """The dispatch key a task message id or completion id names (short ids only)."""
    key = msg_id[: -len("/done")] if msg_id.endswith("/done") else msg_id
    parts = key.rsplit("/", 2)
    return key if len(parts) == 3 and parts[2].isdigit() and "~" not in key else None


def install(rec: Recorder, role: str) -> None:
    """Wrap the functions of each phase (in this process only)."""
    import subprocess as real_subprocess

    from dagq.backends.sqlite import backend as sqlite_backend
    from dagq.backends.sqlite import queue as sqlite_queue
    from dagq.core import engine
    from dagq.ports import RequestStats
    from dagq.protocol.names import COMPLETIONS
    from dagq.runtime import commit as rt_commit
    from dagq.runtime import coordinator as rt_coordinator
    from dagq.runtime import dispatch as rt_dispatch
    from dagq.runtime import states as rt_states
    from dagq.worker import attempt_tracking, claims, gate, history, logcapture, process, spawner
    from dagq.worker import processors as w_processors
    from dagq.worker import publish as w_publish
    from dagq.worker import runtime as w_runtime
    from dagq.worker import workdirs as w_workdirs

    def wrap(owner: object, attr: str, phase: str, keyed: bool = True) -> None:
        setattr(owner, attr, rec.timed(phase, getattr(owner, attr), keyed=keyed))

    # store requests: the backend's own counter, attributed to the phase running
    original_add = RequestStats.add

    def add(self: RequestStats, kind: str, n: int = 1) -> None:
        original_add(self, kind, n)
        if kind != "queue.receive":  # counted by the receive wrapper (task or idle)
            rec.request(kind, n)

    _set(RequestStats, "add", add)

    # queues
    Q = sqlite_queue.SqliteQueue

    def received(result: Any, args: tuple[Any, ...]) -> None:
        queue, msgs = args[0], result[0]
        if not msgs:
            return
        keys = tuple(k for k in (_key_of(m.id) for m in msgs) if k is not None)
        done = queue.name == COMPLETIONS
        for k in keys:
            rec.event(k, "done_received" if done else "received")
            rec.first_seen(k.rsplit("/", 2)[0])
        rec.set_keys(keys)

    def try_phase(queue: Any, *_: Any) -> str:
        return C_RECEIVE if queue.name == COMPLETIONS and role == "coordinator" else W_RECEIVE

    raw_try = Q._try_receive

    def try_receive_split(self: Any, max_messages: int, vis: float) -> Any:
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        result = raw_try(self, max_messages, vis)
        wall, cpu = time.perf_counter_ns() - t0, time.thread_time_ns() - c0
        st = rec.stack()
        if st:
            st[-1].child_wall += wall
            st[-1].child_cpu += cpu
        if result[0]:  # took messages: from now on this thread works for their tasks
            received(result, (self,))
            rec.add(try_phase(self), wall, cpu)
            rec.request("queue.receive", 1, try_phase(self))
        else:
            rec.add(IDLE_QUERY, wall, cpu, keyed=False)
        return result

    _set(Q, "_try_receive", try_receive_split)

    raw_receive = Q.receive

    def receive(self: Any, max_messages: int, vis: float, wait_s: float = 0.0) -> Any:
        st = rec.stack()
        frame = _Frame(RECEIVE_WAIT)
        st.append(frame)
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        try:
            msgs = raw_receive(self, max_messages, vis, wait_s)
        finally:
            wall, cpu = time.perf_counter_ns() - t0, time.thread_time_ns() - c0
            st.pop()
            if st:
                st[-1].child_wall += wall
                st[-1].child_cpu += cpu
            rec.add(RECEIVE_WAIT, wall - frame.child_wall, cpu - frame.child_cpu, keyed=False)
        if not msgs:
            rec.request("queue.receive", 1, RECEIVE_WAIT, keyed=False)
        return msgs

    _set(Q, "receive", receive)

    raw_send, raw_send_many = Q.send, Q.send_many

    def send(self: Any, body: bytes, **kw: Any) -> None:
        raw_send(self, body, **kw)
        mid = kw.get("message_id")
        key = _key_of(mid) if isinstance(mid, str) else None
        if key is not None and self.name == COMPLETIONS:
            rec.event(key, "done_sent")

    _set(Q, "send", rec.timed(W_SEND, send))

    def send_many(self: Any, items: Iterable[tuple[bytes, float, str | None]]) -> None:
        items = list(items)
        raw_send_many(self, items)
        for _, _, mid in items:
            key = _key_of(mid) if mid else None
            if key is not None:
                rec.event(key, "sent")

    _set(Q, "send_many", rec.timed(C_SEND_MANY, send_many))
    wrap(Q, "delete", W_DELETE)
    wrap(Q, "delete_many", C_ACK)

    if role == "worker":
        W = w_runtime.Worker
        timed_handle = rec.timed(W_HANDLE, _get(W, "_handle"))

        def handle(self: Any, msg: Any) -> None:
            try:
                timed_handle(self, msg)
            finally:
                rec.set_keys(())

        _set(W, "_handle", handle)
        wrap(W, "_execute", W_EXECUTE)
        wrap(w_runtime, "decode_task", W_DECODE)
        wrap(claims, "admit", W_CLAIM)
        wrap(w_runtime, "expand", W_EXPAND)
        wrap(W, "_announce", W_ANNOUNCE)
        wrap(gate.Gate, "check", W_GATE)
        wrap(W, "_context", W_CONTEXT)
        wrap(w_runtime, "new_workdir", W_WORKDIR)
        wrap(w_workdirs, "_remove_known", BG_RMTREE, keyed=False)
        T = attempt_tracking.AttemptTracker
        wrap(T, "__init__", W_TRACKER_INIT)
        wrap(T, "start", W_TRACKER_START)
        wrap(T, "end", W_TRACKER_END)
        L = logcapture.LogCapture
        wrap(L, "finish", W_LOG_FINISH)
        wrap(L, "_put", W_LOG_PUT)
        wrap(L, "_loop", BG_LOG_POLL, keyed=False)
        wrap(history.HistoryWriter, "flush", BG_HISTORY, keyed=False)
        S = w_processors.ShellProcessor
        wrap(S, "run", W_PROCESSOR)
        wrap(process, "run_process", W_RUN_PROCESS)
        _set(w_processors, "run_process", process.run_process)
        wrap(w_publish, "completion", W_PUBLISH)

        class TimedPopen(real_subprocess.Popen[bytes]):
            pass

        # the start (posix_spawn, or Popen where the task has a directory to change to)
        # and the wait for the task's exit, whichever way it was started
        wrap(process, "_start", W_SPAWN)
        wrap(TimedPopen, "wait", W_WAIT)
        wrap(spawner.SpawnServer, "wait", W_WAIT)

        proxy = types.SimpleNamespace(**{k: getattr(real_subprocess, k)
                                         for k in dir(real_subprocess)
                                         if not k.startswith("__")})
        proxy.Popen = TimedPopen
        _set(process, "subprocess", proxy)
        os_proxy = types.SimpleNamespace(**{k: getattr(os, k) for k in dir(os)
                                            if not k.startswith("__")})
        os_proxy.waitpid = rec.timed(W_WAIT, os.waitpid)
        _set(process, "os", os_proxy)
    else:
        C = rt_coordinator.Coordinator
        timed_step = rec.timed(C_STEP, _get(C, "step"))

        def step(self: Any, wait_s: float = 0.0) -> int:
            try:
                n: int = timed_step(self, wait_s)
                return n
            finally:
                rec.set_keys(())

        _set(C, "step", step)
        wrap(rt_coordinator, "decode_and_group", C_DECODE)
        wrap(rt_commit.Committer, "commit_group", C_GROUP)
        SW = rt_states.StateWriter
        wrap(SW, "read", C_READ)
        wrap(SW, "still_stored", C_ETAG)
        wrap(SW, "update_index", C_INDEX)
        wrap(engine, "apply", C_APPLY)
        wrap(rt_states, "write_state", C_WRITE)
        ST = sqlite_backend.SqliteStates
        wrap(ST, "append", C_WRITE_SQL)
        wrap(ST, "replace", C_WRITE_SQL)
        OS = rt_dispatch.OutboxSender
        wrap(OS, "send", C_DISPATCH)
        wrap(C, "flush", BG_FLUSH, keyed=False)
        wrap(C, "sweep", BG_SWEEP, keyed=False)


def install_profiler(profiles: list[cProfile.Profile]) -> None:
    """Profile the worker's ``_handle`` (one profiler per slot thread)."""
    from dagq.worker import runtime as w_runtime

    local = threading.local()
    raw = w_runtime.Worker._handle

    def handle(self: Any, msg: Any) -> None:
        prof: cProfile.Profile | None = getattr(local, "prof", None)
        if prof is None:
            prof = local.prof = cProfile.Profile()
            profiles.append(prof)
        prof.enable()
        try:
            raw(self, msg)
        finally:
            prof.disable()

    _set(w_runtime.Worker, "_handle", handle)


def serve(role: str, out: Path, slots: int, mode: str) -> None:
    """Run ``dagq coordinator`` or ``dagq worker default`` with the timers (``timed``), the
    worker's profiler (``profile``) or nothing (``bare``); dump at exit."""
    from dagq.cli.main import cli

    rec = Recorder()
    profiles: list[cProfile.Profile] = []
    if mode == "profile":
        if role == "worker":
            install_profiler(profiles)
    elif mode == "timed":
        install(rec, role)
    argv = ["coordinator"] if role == "coordinator" else [
        "worker", "default", "--concurrency", str(slots)]
    with contextlib.suppress(SystemExit):  # the worker command exits with its code
        cli.main(args=argv, prog_name="dagq", standalone_mode=False)
    if profiles:
        stats: pstats.Stats | None = None
        for p in profiles:
            p.create_stats()
            stats = pstats.Stats(p) if stats is None else stats.add(p)
        if stats is not None:
            stats.dump_stats(str(out.with_suffix(".prof")))
    rec.dump(out, role)


# -- the driver ---------------------------------------------------------------------------

def fan(n: int) -> WorkflowDef:
    """1 root, ``n`` parallel tasks, 1 sink."""
    mids = tuple(TaskDef(f"t{i}", CMD, ("root",)) for i in range(n))
    sink = TaskDef("sink", CMD, tuple(t.name for t in mids))
    return WorkflowDef("cost-fan", (TaskDef("root", CMD), *mids, sink))


def chain(n: int, name: str = "cost-chain") -> WorkflowDef:
    """``n`` tasks, each depending on the previous one."""
    return WorkflowDef(name, tuple(
        TaskDef(f"c{i}", CMD, (f"c{i - 1}",) if i else ()) for i in range(n)))


def wait_terminal(client: WorkflowClient, wf_id: str, timeout: float = 900,
                  procs: Mapping[str, subprocess.Popen[bytes]] | None = None,
                  logs: Mapping[str, Path] | None = None) -> str:
    """Poll the index row until the workflow is terminal; returns the status. Raises
    if one of ``procs`` (by role) exits first, naming its log in ``logs``, or time runs
    out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.row(wf_id).status
        if status in TERMINAL_WORKFLOW_STATUSES:
            return status
        for role, proc in (procs or {}).items():
            if proc.poll() is not None:
                where = f"; its log: {logs[role]}" if logs and role in logs else ""
                raise RuntimeError(f"the {role} exited with code {proc.returncode} before "
                                   f"{wf_id} finished{where}")
        time.sleep(0.002)
    raise TimeoutError(f"{wf_id} did not finish in {timeout}s")


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every process (they dump their figures), then wait."""
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()


def run_scenario(tmp: Path, name: str, defn: WorkflowDef, slots: int,
                 mode: str = "timed") -> dict[str, Any]:
    """Fresh store and processes; warm-up chain; the measured workflow; the dumps."""
    store = f"sqlite:{tmp / (name + '.db')}"
    env = dict(os.environ, DAGQ_STORE=store, DAGQ_IDLE_POLL="0.2",
               DAGQ_MAX_IDLE_BACKOFF="0.2", DAGQ_LOG_CAPTURE="true")
    env.pop("DAGQ_STATS_FILE", None)
    os.environ["DAGQ_STORE"] = store
    client = WorkflowClient(backend_from_settings(Settings.from_env()))
    roles = ("coordinator", "worker")
    with contextlib.ExitStack() as stack:
        procs: dict[str, subprocess.Popen[bytes]] = {}
        for role in roles:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--serve", role,
                   "--dump", str(tmp / f"{name}-{role}.json"), "--slots", str(slots)]
            cmd += ["--mode", mode]
            log = stack.enter_context((tmp / f"{name}-{role}.log").open("wb"))
            procs[role] = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                           stderr=log, start_new_session=True)
        stack.callback(_stop, list(procs.values()))
        logs = {role: tmp / f"{name}-{role}.log" for role in roles}
        time.sleep(1.0)
        warm = client.submit(chain(5, "cost-warmup")).id
        if wait_terminal(client, warm, procs=procs, logs=logs) != "completed":
            raise RuntimeError("warm-up chain failed")
        t0 = time.perf_counter()
        wf_id = client.submit(defn).id
        status = wait_terminal(client, wf_id, procs=procs, logs=logs)
        wall = time.perf_counter() - t0
        if status != "completed":
            raise RuntimeError(f"{defn.name} ended {status}")
    dumps = {role: json.loads((tmp / f"{name}-{role}.json").read_text())
             for role in roles}
    return {"wf_id": wf_id, "wall_s": wall, "tasks": len(defn.tasks), "dumps": dumps,
            "prof": tmp / f"{name}-worker.prof"}


def _stats(values: list[float]) -> tuple[float, float]:
    return (statistics.median(values), statistics.fmean(values)) if values else (0.0, 0.0)


def analyse(run: dict[str, Any], ordered_tasks: list[str] | None) -> dict[str, Any]:
    """Per-task figures of one scenario."""
    wf_id: str = run["wf_id"]
    dumps: dict[str, dict[str, Any]] = run["dumps"]
    n = run["tasks"]
    per_key: dict[str, dict[str, list[float]]] = defaultdict(dict)
    tasks_seen: dict[str, int] = {}
    for role, d in dumps.items():
        tasks_seen[role] = len(d["per_key"])
        for key, phases in d["per_key"].items():
            if key.startswith(wf_id + "/"):
                per_key[key].update(phases)
    keys = sorted(per_key)
    if len(keys) != n:
        print(f"  note: {len(keys)} task keys seen, {n} expected", file=sys.stderr)
    rows = []
    sums = [0.0] * len(keys)
    for phase in ORDER + sorted({p for k in keys for p in per_key[k]} - set(ORDER)):
        walls = [per_key[k].get(phase, [0.0] * 4)[0] / 1000 for k in keys]
        if not any(walls):
            continue
        cpu = sum(per_key[k].get(phase, [0.0] * 4)[1] for k in keys) / 1000 / n
        reqs = sum(per_key[k].get(phase, [0.0] * 4)[2] for k in keys) / n
        calls = sum(per_key[k].get(phase, [0.0] * 4)[3] for k in keys) / n
        med, mean = _stats(walls)
        sums = [s + w for s, w in zip(sums, walls, strict=True)]
        rows.append({"phase": phase, "median_us": med, "mean_us": mean, "cpu_us": cpu,
                     "requests": reqs, "calls": calls})
    sum_med, sum_mean = _stats(sums)
    wall_us = run["wall_s"] * 1e6 / n
    background = []
    for role, d in dumps.items():
        for phase, (wall, cpu, reqs, calls) in sorted(d["background"].items()):
            per = max(tasks_seen[role], 1)
            background.append({"role": role, "phase": phase, "wall_us": wall / 1000 / per,
                               "cpu_us": cpu / 1000 / per, "requests": reqs / per,
                               "calls": calls / per})
    kinds: dict[str, float] = defaultdict(float)
    for d in dumps.values():
        per = max(len(d["per_key"]), 1)
        for kind, c in {**d["kinds_keyed"]}.items():
            kinds[kind] += c / per
        for kind, c in d["kinds_background"].items():
            kinds[kind + " (bg)"] += c / per
    cpu = {}
    for role, d in dumps.items():  # from the first task of the run to the process's exit
        start = d["cpu_at"].get(wf_id, d["cpu_end"])
        cpu[role] = {"self_ms": (d["cpu_end"][0] - start[0]) * 1000 / n,
                     "children_ms": (d["cpu_end"][1] - start[1]) * 1000 / n}
    events: dict[str, dict[str, int]] = defaultdict(dict)
    for d in dumps.values():
        for key, ev in d["events"].items():
            if key.startswith(wf_id + "/"):
                events[key].update(ev)
    waits = {"task queue wait (sent -> worker took it)": [
                 (e["received"] - e["sent"]) / 1000 for e in events.values()
                 if "received" in e and "sent" in e],
             "completion queue wait (sent -> coordinator took it)": [
                 (e["done_received"] - e["done_sent"]) / 1000 for e in events.values()
                 if "done_received" in e and "done_sent" in e]}
    hops: dict[str, list[float]] = {}
    if ordered_tasks:
        ks = [f"{wf_id}/{t}/1" for t in ordered_tasks]
        segs: dict[str, list[float]] = defaultdict(list)
        for a, b in itertools.pairwise(ks):
            ea, eb = events.get(a, {}), events.get(b, {})
            need = ("sent", "received", "done_sent", "done_received")
            if not all(x in ea for x in need) or "sent" not in eb:
                continue
            segs["1 task queue: sent -> worker took it"].append(
                ea["received"] - ea["sent"])
            segs["2 worker: took it -> completion sent"].append(
                ea["done_sent"] - ea["received"])
            segs["3 completion queue: sent -> coordinator took it"].append(
                ea["done_received"] - ea["done_sent"])
            segs["4 coordinator: took it -> next task sent"].append(
                eb["sent"] - ea["done_received"])
            segs["hop: sent -> next task sent"].append(eb["sent"] - ea["sent"])
        hops = {k: [x / 1000 for x in v] for k, v in sorted(segs.items())}
    return {"tasks": n, "wall_s": run["wall_s"], "wall_per_task_us": wall_us, "rows": rows,
            "sum_median_us": sum_med, "sum_mean_us": sum_mean, "background": background,
            "requests_by_kind": dict(sorted(kinds.items())), "cpu_per_task": cpu,
            "waits": {k: _stats(v) for k, v in waits.items()},
            "hops": {k: _stats(v) for k, v in hops.items()},
            "rss_mb": {role: round(d["max_rss_mb"], 1) for role, d in dumps.items()}}


def show(title: str, a: dict[str, Any]) -> None:
    """Print one scenario's breakdown."""
    print(f"\n== {title}: {a['tasks']} tasks in {a['wall_s']:.2f} s ==")
    print(f"{'phase (self time)':<56}{'median':>9}{'mean':>9}{'CPU':>9}{'req':>7}"
          f"{'calls':>7}")
    print(f"{'':<56}{'µs/task':>9}{'µs/task':>9}{'µs/task':>9}{'/task':>7}{'/task':>7}")
    for r in a["rows"]:
        print(f"{r['phase']:<56}{r['median_us']:9.0f}{r['mean_us']:9.0f}{r['cpu_us']:9.0f}"
              f"{r['requests']:7.2f}{r['calls']:7.2f}")
    reqs = sum(r["requests"] for r in a["rows"])
    print(f"{'sum of phases (per task)':<56}{a['sum_median_us']:9.0f}{a['sum_mean_us']:9.0f}"
          f"{sum(r['cpu_us'] for r in a['rows']):9.0f}{reqs:7.2f}")
    print(f"{'wall time per task (end to end / tasks)':<56}{'':>9}{a['wall_per_task_us']:9.0f}")
    if "bare_wall_per_task_us" in a:
        print(f"{'  the same run without the timers':<56}{'':>9}"
              f"{a['bare_wall_per_task_us']:9.0f}")
    left = a["wall_per_task_us"] - a["sum_mean_us"]
    label = ("unaccounted (wall - sum of phases)" if left >= 0 else
             "overlap (sum of phases - wall: slots and coordinator in parallel)")
    print(f"{label:<56}{'':>9}{abs(left):9.0f}")
    print("latency, not cost (µs)" + ("" if a["hops"] else
          ": in a fan-out the task queue wait is mostly queueing behind busy slots"))
    for what, (med, mean) in a["waits"].items():
        print(f"  {what:<54}{med:9.0f}{mean:9.0f}")
    if a["hops"]:
        print("critical path of one hop (chain), µs        median     mean")
        for what, (med, mean) in a["hops"].items():
            print(f"  {what:<54}{med:9.0f}{mean:9.0f}")
    print("outside any task, per task of the run (wall of threads and waits is mostly sleep)")
    print(f"{'':<56}{'wall µs':>9}{'CPU µs':>9}{'req':>7}")
    for b in a["background"]:
        if b["wall_us"] < 0.5 and b["requests"] < 0.005:
            continue
        print(f"  {b['role'][:5]} {b['phase']:<48}{b['wall_us']:9.0f}{b['cpu_us']:9.0f}"
              f"{b['requests']:7.2f}")
    cpu = a["cpu_per_task"]
    print("process CPU per task (first task of the run to exit): " + ", ".join(
        f"{role} {v['self_ms']:.2f} ms (+{v['children_ms']:.2f} ms in child processes)"
        for role, v in cpu.items()) + f"; peak RSS MB {a['rss_mb']}")
    print("store requests per task by kind: " + ", ".join(
        f"{k}={v:.2f}" for k, v in a["requests_by_kind"].items() if v >= 0.005))


def spawn_micro(tmp: Path, n: int) -> dict[str, tuple[float, float]]:
    """Spawn-to-exit of ``true`` N times each way, as the worker starts tasks (own session,
    output to a log file): through the spawn server and sh (``run_process``, as the worker
    does), through a supervisor of its own and sh, through sh alone, directly."""
    from dagq.worker.parentdeath import command
    from dagq.worker.process import run_process

    sup = list(command())
    log = tmp / "spawn.log"
    out: dict[str, tuple[float, float]] = {}
    times = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        run_process(["/bin/sh", "-c", "true"], env=dict(os.environ), cwd=None, log_path=log,
                    stop=threading.Event(), timeout_s=None, kill_timeout=5.0)
        times.append((time.perf_counter_ns() - t0) / 1000)
    out["run_process: /bin/sh -c true (as the worker does)"] = _stats(times)
    ways = {
        "a supervisor of its own + /bin/sh -c true":
            [*sup, str(os.getpid()), "--", "/bin/sh", "-c", "true"],
        "/bin/sh -c true (no supervisor)": ["/bin/sh", "-c", "true"],
        "true (no supervisor, no shell)": ["/bin/true"],
    }
    with open(log, "ab") as f:
        for label, argv in ways.items():
            times = []
            for _ in range(n):
                t0 = time.perf_counter_ns()
                subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f,
                                 stderr=subprocess.STDOUT, start_new_session=True).wait()
                times.append((time.perf_counter_ns() - t0) / 1000)
            out[label] = _stats(times)
    return out


def top_functions(prof: Path, tasks: int, limit: int = 15) -> list[dict[str, Any]]:
    """The ``limit`` functions with the largest cumulative time, per task."""
    st = pstats.Stats(str(prof), stream=io.StringIO())
    raw: dict[Any, Any] = _get(st, "stats")
    rows = []
    for (file, line, func), (_cc, nc, tt, ct, _callers) in raw.items():
        where = file.replace(str(ROOT) + "/", "").replace(sys.prefix + "/", "")
        if "/lib/python" in where:
            where = "stdlib/" + where.split("/lib/python", 1)[1].split("/", 1)[1]
        rows.append({"function": f"{func} ({where}:{line})" if line else func,
                     "cum_us": ct * 1e6 / tasks, "self_us": tt * 1e6 / tasks,
                     "calls": nc / tasks})
    rows.sort(key=lambda r: -r["cum_us"])
    return rows[:limit]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chain", type=int, default=200, help="chain length (0: skip)")
    parser.add_argument("--fanout", type=int, default=1000, help="fan-out width (0: skip)")
    parser.add_argument("--slots", type=int, default=2, help="worker slots")
    parser.add_argument("--profile-chain", type=int, default=200,
                        help="chain length of the cProfile pass")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile pass")
    parser.add_argument("--spawn", type=int, default=200,
                        help="spawns per way in the spawn comparison (0: skip)")
    parser.add_argument("--task-cmd", default="true",
                        help="the shell command of every task (e.g. 'echo hi' to store a log)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--serve", choices=["coordinator", "worker"], help=argparse.SUPPRESS)
    parser.add_argument("--dump", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="timed", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.dump, args.slots, args.mode)
        return

    CMD["cmd"] = args.task_cmd
    tmp = Path(tempfile.mkdtemp(prefix="dagq-cost-"))
    result: dict[str, Any] = {"date": datetime.date.today().isoformat(),
                              "cpus": os.cpu_count(), "slots": args.slots,
                              "python": sys.version.split()[0]}
    from dagq.worker.parentdeath import command, serving
    result["supervisor"] = " ".join(command()) + (" --serve (one per worker)" if serving()
                                                   else " (one per task)")
    scenarios: list[tuple[str, str, WorkflowDef, list[str] | None]] = []
    if args.chain:
        names = [f"c{i}" for i in range(args.chain)]
        scenarios.append((f"chain of {args.chain} `{args.task_cmd}` tasks", "chain",
                          chain(args.chain), names))
    if args.fanout:
        scenarios.append((f"fan-out 1+{args.fanout}+1 `{args.task_cmd}` tasks", "fanout",
                          fan(args.fanout), None))
    for title, name, defn, order in scenarios:
        result[name] = {"title": title,
                        **analyse(run_scenario(tmp, name, defn, args.slots), order)}
        bare = run_scenario(tmp, name + "-bare", defn, args.slots, mode="bare")
        result[name]["bare_wall_per_task_us"] = bare["wall_s"] * 1e6 / bare["tasks"]
    if args.spawn:
        result["spawn"] = spawn_micro(tmp, args.spawn)
    if not args.no_profile and args.profile_chain:
        prof_run = run_scenario(tmp, "profile", chain(args.profile_chain), args.slots,
                                mode="profile")
        result["profile"] = {"tasks": prof_run["tasks"],
                             "top": top_functions(prof_run["prof"],
                                                  prof_run["tasks"] + 5)}
    if args.json:
        print(json.dumps(result, indent=2, default=str))
        return
    print(f"dagq per-task cost, embedded SQLite store, {result['cpus']} CPUs, "
          f"{args.slots} worker slots, Python {result['python']}, {result['date']}")
    print(f"task supervisor: {result['supervisor']}")
    for _, name, _, _ in scenarios:
        show(f"{result[name]['title']}, {args.slots} slots", result[name])
    if "spawn" in result:
        print(f"\n== spawn to exit of one task process ({args.spawn} each, sequential) ==")
        print(f"{'':<56}{'median':>9}{'mean':>9}")
        for label, (med, mean) in result["spawn"].items():
            print(f"{label:<56}{med:9.0f}{mean:9.0f}")
    if "profile" in result:
        p = result["profile"]
        print(f"\n== worker critical path under cProfile (Worker._handle, chain of "
              f"{p['tasks']} + 5 warm-up), top 15 by cumulative time per task ==")
        print(f"{'cum µs':>8}{'self µs':>9}{'calls':>7}  function")
        for r in p["top"]:
            print(f"{r['cum_us']:8.0f}{r['self_us']:9.0f}{r['calls']:7.2f}  {r['function']}")
    print(f"\n(raw dumps in {tmp})")


if __name__ == "__main__":
    main()

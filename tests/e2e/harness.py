"""Drives the real ``dagq`` command as subprocesses on a temporary embedded store.

``Dagq`` runs one-shot commands (``submit``, ``status --json``, ...), starts long-running
``dagq coordinator`` / ``dagq worker`` processes in their own sessions, and waits for
workflows to end by polling ``dagq status ID --json`` with generous deadlines (never a
timing assert). Every process it started is stopped by ``close()``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"
STEP = SCRIPTS / "step.py"
"""The configurable task script (see scripts/step.py)."""
DAGQ = Path(sys.executable).with_name("dagq")

TERMINAL = {"completed", "failed", "cancelled"}

FAST_ENV: dict[str, str] = {
    "DAGQ_CANCEL_POLL_INTERVAL": "0.2",
    "DAGQ_SWEEP_INTERVAL": "0.5",
    "DAGQ_OUTBOX_GRACE": "1",
    "DAGQ_OUTBOX_FLUSH": "0.2",
    "DAGQ_VISIBILITY_TIMEOUT": "2",
    "DAGQ_IDLE_POLL": "0.2",
    "DAGQ_MAX_IDLE_BACKOFF": "0.2",
    "DAGQ_KILL_TIMEOUT": "2",
    "DAGQ_STALE_PENDING": "2",
    "DAGQ_TIMEOUT_GRACE": "2",
    "DAGQ_HEARTBEAT_INTERVAL": "0.5",
}
"""Short intervals so that recovery after a crash takes seconds, not minutes."""

WORKER_ENV: dict[str, str] = {"DAGQ_VISIBILITY_TIMEOUT": "5"}
"""Workers keep a longer lease than the coordinator so that a busy machine does not let a
running task's message reappear (which would be a legitimate, but here unwanted, rerun)."""


def step(*flags: object) -> str:
    """A shell command running scripts/step.py with ``flags``."""
    return shlex.join(["python", str(STEP), *(str(f) for f in flags)])


def sh_step(log: Path, v: int | None = None, fail_until: int = 0) -> str:
    """A shell-only task (no Python start-up): like ``step("--log", log, ...)``."""
    parts = [f'echo "$DAGQ_WORKFLOW_ID $DAGQ_TASK $DAGQ_ATTEMPT" >> {shlex.quote(str(log))}']
    if fail_until:
        parts.append(f'if [ "$DAGQ_ATTEMPT" -lt {fail_until} ]; then '
                     'echo "failing attempt $DAGQ_ATTEMPT on purpose" >&2; exit 1; fi')
    extra = f',"v":{v}' if v is not None else ""
    parts.append(f"printf '{{\"task\":\"%s\",\"attempt\":%s{extra}}}' "
                 '"$DAGQ_TASK" "$DAGQ_ATTEMPT" > "$DAGQ_OUTPUT_FILE"')
    return "; ".join(parts)


def eventually(probe: Callable[[], T | None], what: str, deadline_s: float = 60.0,
               interval_s: float = 0.2) -> T:
    """Poll ``probe`` until it returns something other than None/False; fail after
    ``deadline_s`` naming ``what``."""
    end = time.monotonic() + deadline_s
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"gave up after {deadline_s:g}s waiting for {what}")
        time.sleep(interval_s)


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@dataclass
class Proc:
    """A background ``dagq`` process (own session) with its combined output in a file."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        """Everything the process printed so far."""
        return self.log.read_text(errors="replace")

    def wait(self, deadline_s: float = 60.0) -> int:
        """Wait for the process to exit by itself; its return code."""
        try:
            return self.popen.wait(deadline_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.name} still running after {deadline_s:g}s; output:\n{self.text()}"
            ) from None

    def stop(self, deadline_s: float = 20.0) -> int:
        """SIGTERM, then SIGKILL if it does not exit in time; its return code."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(deadline_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.popen.wait()

    def kill(self) -> None:
        """SIGKILL the process (not its task processes, which run in their own groups)."""
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait()


@dataclass
class Dagq:
    """The ``dagq`` CLI on one temporary store under ``root``."""

    root: Path
    base_env: dict[str, str] = field(default_factory=dict)
    procs: list[Proc] = field(default_factory=list)
    task_pids: list[Path] = field(default_factory=list)
    """Pid files written by tasks; their processes are killed by ``close()``."""

    def __post_init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DAGQ_")}
        env.update(FAST_ENV)
        env["DAGQ_STORE"] = f"sqlite:{self.root / 'x.db'}"
        env.update(self.base_env)
        self.base_env = env

    @property
    def store(self) -> str:
        """The ``DAGQ_STORE`` value."""
        return self.base_env["DAGQ_STORE"]

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of a ``dagq`` process."""
        return {**self.base_env, **(extra or {})}

    # -- one-shot commands ---------------------------------------------------------------
    def run(self, *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None,
            cwd: Path | None = None, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run ``dagq ARGS`` to the end; never raises on a non-zero exit."""
        return subprocess.run(
            [str(DAGQ), *args], input=stdin if stdin is not None else "",
            capture_output=True, text=True, env=self.env(env), cwd=cwd or self.root,
            timeout=timeout_s, check=False,
        )

    def ok(self, *args: str, stdin: str | None = None) -> str:
        """Run ``dagq ARGS``, assert exit 0, return stdout."""
        res = self.run(*args, stdin=stdin)
        assert res.returncode == 0, (
            f"dagq {' '.join(args)} exited {res.returncode}\n"
            f"stdout: {res.stdout}\nstderr: {res.stderr}")
        return res.stdout

    def json(self, *args: str) -> Any:
        """Run ``dagq ARGS --json`` and parse its one JSON document."""
        return json.loads(self.ok(*args, "--json"))

    def write(self, name: str, text: str) -> Path:
        """Write a definition (or any file) under the store's directory."""
        path = self.root / name
        path.write_text(text)
        return path

    def define(self, name: str, tasks: list[dict[str, Any]], **fields: Any) -> Path:
        """Write a YAML definition ``name`` with ``tasks`` (and top-level ``fields``)."""
        text = yaml.safe_dump({"name": name, **fields, "tasks": tasks}, sort_keys=False)
        return self.write(f"{name}.yaml", text)

    def submit(self, path: Path, *args: str) -> str:
        """Submit one definition; its workflow id."""
        out = self.ok("submit", str(path), *args).split()
        assert len(out) == 1, out
        return out[0]

    def status(self, wf_id: str) -> dict[str, Any]:
        """``dagq status ID --json``."""
        value: dict[str, Any] = self.json("status", wf_id)
        return value

    def tasks(self, wf_id: str, *filters: str) -> dict[str, dict[str, Any]]:
        """``dagq tasks --workflow ID --json`` by task name."""
        rows = self.json("tasks", "--workflow", wf_id, *filters)
        return {r["name"]: r for r in rows}

    def statuses(self, wf_id: str) -> dict[str, str]:
        """Task name -> status."""
        return {name: r["status"] for name, r in self.tasks(wf_id).items()}

    def output(self, wf_id: str, task: str) -> Any:
        """``dagq output ID TASK`` parsed."""
        return json.loads(self.ok("output", wf_id, task))

    def wait_terminal(self, wf_id: str, deadline_s: float = 60.0) -> dict[str, Any]:
        """Poll ``dagq status`` until the workflow is terminal; its summary."""
        def probe() -> dict[str, Any] | None:
            summary = self.status(wf_id)
            return summary if summary["status"] in TERMINAL else None

        try:
            return eventually(probe, f"workflow {wf_id} to end", deadline_s, 0.25)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.diagnostics(wf_id)}") from None

    def wait_all_terminal(self, ids: list[str], deadline_s: float = 90.0
                          ) -> dict[str, dict[str, Any]]:
        """Poll ``dagq list --json`` until every workflow of ``ids`` is terminal."""
        def probe() -> dict[str, dict[str, Any]] | None:
            rows = {r["id"]: r for r in self.json("list") if r["id"] in ids}
            done = len(rows) == len(ids) and all(r["status"] in TERMINAL for r in rows.values())
            return rows if done else None

        try:
            return eventually(probe, f"workflows {ids} to end", deadline_s, 0.25)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.diagnostics()}") from None

    def diagnostics(self, wf_id: str | None = None) -> str:
        """Task table and process logs, for failure messages."""
        parts = []
        if wf_id is not None:
            parts.append(self.run("tasks", "--workflow", wf_id).stdout)
        for p in self.procs:
            parts.append(f"--- {p.name} (rc={p.popen.poll()}):\n{p.text()[-3000:]}")
        return "\n".join(parts)

    # -- background processes ----------------------------------------------------------
    def start(self, name: str, *args: str, env: Mapping[str, str] | None = None) -> Proc:
        """Start ``dagq ARGS`` in its own session with output to a log file."""
        log = self.root / f"{name}-{len(self.procs)}.log"
        with open(log, "wb") as out:
            popen = subprocess.Popen(
                [str(DAGQ), *args], env=self.env(env), cwd=self.root, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        proc = Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    def coordinator(self, env: Mapping[str, str] | None = None) -> Proc:
        """Start ``dagq coordinator``."""
        return self.start("coordinator", "coordinator", env=env)

    def worker(self, queue: str = "default", concurrency: int = 2,
               env: Mapping[str, str] | None = None) -> Proc:
        """Start ``dagq worker QUEUE --concurrency N``."""
        return self.start(f"worker-{queue}", "worker", queue, "--concurrency", str(concurrency),
                          env={**WORKER_ENV, **(env or {})})

    def close(self) -> None:
        """Stop every process started here and every task process that left a pid file."""
        for p in self.procs:
            if p.popen.poll() is None:
                p.popen.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.popen.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        for pidfile in self.task_pids:
            kill_pidfile(pidfile)


def kill_pidfile(pidfile: Path) -> None:
    """SIGKILL the process whose pid ``pidfile`` holds (if it still runs)."""
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def executions(log: Path) -> list[tuple[str, str, int]]:
    """``(workflow, task, attempt)`` lines that tasks appended to ``log``, in order."""
    if not log.exists():
        return []
    out = []
    for line in log.read_text().splitlines():
        wf, task, attempt = line.split()
        out.append((wf, task, int(attempt)))
    return out

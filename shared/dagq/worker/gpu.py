"""GPU slots: each running task gets its own ``CUDA_VISIBLE_DEVICES``, never shared.

Devices are what the machine reports: ``CUDA_VISIBLE_DEVICES`` when it is set (an empty
value means *no* GPUs), else ``nvidia-smi -L``, whose lines name each GPU's UUID and, on a
GPU split into MIG instances, each instance's UUID (``MIG-...``); a MIG-split GPU
contributes its instances, not itself. UUIDs stay right whatever ``CUDA_DEVICE_ORDER``
a task uses; tasks given numeric ids also get ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so that
CUDA numbers GPUs as ``nvidia-smi`` does.

A task takes ``kwargs.gpus`` devices (default: the worker's ``--gpus-per-task``) from the
worker's free ones and waits while too few are free; a task asking for more than the
worker has fails with a message saying so. Before taking work the worker checks that its
GPUs still answer (``nvidia-smi`` exits 0 and reports no lost GPU); an unhealthy worker
takes nothing, says so in its heartbeat (``dagq doctor``, ``--ready``) and looks again.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping
from typing import Any

from dagq.errors import ConfigError, TaskError

log = logging.getLogger("dagq.worker")

_GPU_LINE = re.compile(r"^GPU (\d+): .*\(UUID: (GPU-[^)\s]+)\)")
_MIG_LINE = re.compile(r"^\s+MIG .*\(UUID: (MIG-[^)\s]+)\)")
_BROKEN = ("GPU is lost", "Unknown Error", "ERR!", "Unable to determine the device handle")
HEALTH_EVERY_S = 60.0
"""Seconds between GPU health checks while healthy."""


def parse_list(text: str) -> list[str]:
    """Device UUIDs from ``nvidia-smi -L`` output (MIG instances instead of their GPU)."""
    devices: list[str] = []
    gpu: str | None = None
    migs: list[str] = []
    for line in text.splitlines():
        if m := _GPU_LINE.match(line):
            if gpu is not None:
                devices.extend(migs or [gpu])
            gpu, migs = m.group(2), []
        elif (m := _MIG_LINE.match(line)) and gpu is not None:
            migs.append(m.group(1))
    if gpu is not None:
        devices.extend(migs or [gpu])
    return devices


def _smi(*args: str) -> subprocess.CompletedProcess[str] | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True,
                              timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None


def detect_gpus(env: Mapping[str, str] | None = None) -> list[str]:
    """The devices this worker may hand out (see the module docstring)."""
    env = os.environ if env is None else env
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:  # set, even to "": it decides (empty: no GPUs)
        return [g.strip() for g in visible.split(",") if g.strip()]
    res = _smi("-L")
    return parse_list(res.stdout) if res is not None and res.returncode == 0 else []


def health_problem() -> str | None:
    """Why the GPUs are unhealthy, or None (also when ``nvidia-smi`` is not installed)."""
    res = _smi("--query-gpu=uuid,pci.bus_id", "--format=csv,noheader")
    if res is None:
        return None
    text = (res.stdout + res.stderr).strip()
    broken = next((b for b in _BROKEN if b in text), None)
    if res.returncode != 0 or broken:
        return (f"nvidia-smi reports a GPU problem (exit {res.returncode}): "
                f"{text.splitlines()[-1] if text else 'no output'}")
    return None


class GpuPool:
    """Hands out disjoint groups of GPUs (``per_task`` unless a task asks otherwise);
    blocks while too few are free."""

    def __init__(self, per_task: int, gpus: list[str] | None = None) -> None:
        devices = gpus if gpus is not None else detect_gpus()
        if per_task < 1:
            raise ConfigError("--gpus-per-task must be at least 1")
        repeated = sorted({g for g in devices if devices.count(g) > 1})
        if repeated:
            raise ConfigError(f"--gpus {','.join(devices)} names GPU(s) {','.join(repeated)} "
                              "more than once; list each GPU once, e.g. --gpus 0,1,2,3")
        if len(devices) < per_task:
            raise ConfigError(
                f"--gpus-per-task {per_task} needs at least {per_task} GPU(s) but "
                f"{len(devices)} were found ({','.join(devices) or 'none'}); pass --gpus 0,1,... "
                "or run on a GPU node")
        self.per_task = per_task
        self.devices = list(devices)
        self._free = list(devices)
        self.slots = len(devices) // per_task
        self._cond = threading.Condition()

    def acquire(self, n: int | None = None) -> list[str]:
        """Take ``n`` GPUs (default ``per_task``), waiting until enough are free."""
        n = self.per_task if n is None else n
        if n > len(self.devices):
            raise TaskError(f"the task asks for {n} GPU(s) (kwargs.gpus) but this worker has "
                            f"{len(self.devices)}; send it to a queue whose workers have more")
        with self._cond:
            while len(self._free) < n:
                self._cond.wait()
            taken, self._free = self._free[:n], self._free[n:]
            return taken

    def release(self, gpus: list[str]) -> None:
        """Give GPUs back."""
        with self._cond:
            self._free.extend(gpus)
            self._cond.notify_all()


def worker_pool(per_task: int, gpus: list[str] | None, concurrency: int) -> GpuPool | None:
    """The pool of a worker with ``--gpus-per-task``/``--gpus``/``--concurrency``, or None
    on a machine without GPUs; refuses more slots than the GPUs can give."""
    if per_task == 0:
        devices = gpus if gpus is not None else detect_gpus()
        return GpuPool(1, devices) if devices else None
    pool = GpuPool(per_task, gpus)
    if concurrency > pool.slots:
        raise ConfigError(
            f"--concurrency {concurrency} with --gpus-per-task {per_task} needs "
            f"{concurrency * per_task} GPU(s) but this worker has {len(pool.devices)} "
            f"({','.join(pool.devices)}); use --concurrency {pool.slots} or fewer, or give "
            "tasks their own kwargs.gpus")
    return pool


def take(pool: GpuPool | None, kwargs: Mapping[str, Any], per_task: int) -> list[str] | None:
    """The devices for a task with ``kwargs``: None leaves ``CUDA_VISIBLE_DEVICES`` alone
    (no GPUs here, or neither the task nor the worker says how many), ``[]`` means none.
    Raises ``TaskError`` for a request this worker cannot meet."""
    want = kwargs.get("gpus")
    asked = isinstance(want, int) and not isinstance(want, bool)
    n: int = want if isinstance(want, int) and asked else per_task
    if pool is None:
        if n > 0:
            raise TaskError(f"the task asks for {n} GPU(s) but this worker has none")
        return None
    if n == 0:
        return [] if asked else None
    return pool.acquire(n)


class HealthGate:
    """Keeps a worker whose GPUs fail their health check from taking work."""

    def __init__(self, pool: GpuPool | None, every_s: float = HEALTH_EVERY_S) -> None:
        self.pool = pool
        self.every_s = every_s
        self._problem: str | None = None
        self._next = 0.0

    def problem(self) -> str | None:
        """The last health problem found (None: healthy or no GPUs)."""
        return self._problem

    def blocked(self, stop: threading.Event) -> bool:
        """True (after a pause) if the GPUs are unhealthy now; checks every ``every_s``
        while healthy and every few seconds while not."""
        if self.pool is None:
            return False
        now = time.monotonic()
        if now >= self._next:
            problem = health_problem()
            if problem != self._problem:
                log.log(logging.ERROR if problem else logging.INFO, "GPU health: %s",
                        problem or "healthy again")
            self._problem = problem
            self._next = now + (5.0 if problem else self.every_s)
        if self._problem is None:
            return False
        stop.wait(1.0)
        return True


def shares(gpus: list[str] | None, processes: int, per_task: int,
           concurrency: int) -> list[list[str] | None]:
    """The GPUs of each of ``processes`` worker processes on one machine: ``gpus`` (else
    those detected) in contiguous, disjoint parts, so no two processes hand out the same
    device. One process keeps ``gpus`` as given (None: it detects them itself). Refuses a
    layout whose parts cannot give every slot ``per_task`` GPUs."""
    if processes == 1:
        return [gpus]
    devices = gpus if gpus is not None else detect_gpus()
    each, extra = divmod(len(devices), processes)
    parts, start = [], 0
    for i in range(processes):
        end = start + each + (1 if i < extra else 0)
        parts.append(devices[start:end])
        start = end
    if per_task and min(len(p) for p in parts) < per_task * concurrency:
        raise ConfigError(
            f"--processes {processes} x --concurrency {concurrency} with --gpus-per-task "
            f"{per_task} needs {processes * concurrency * per_task} GPU(s) "
            f"({concurrency * per_task} per process) but {len(devices)} were found "
            f"({','.join(devices) or 'none'}); use fewer processes or slots, or pass --gpus")
    return list(parts)

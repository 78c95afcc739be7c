"""GPU slots: each running task gets its own ``CUDA_VISIBLE_DEVICES``, never shared."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

from dagq.errors import ConfigError


def detect_gpus() -> list[str]:
    """GPU indices on this machine (``CUDA_VISIBLE_DEVICES`` if set, else nvidia-smi)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        return [g.strip() for g in visible.split(",") if g.strip()]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


class GpuPool:
    """Hands out disjoint groups of ``per_task`` GPUs; blocks while none is free."""

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
        self._free = list(devices)
        self.slots = len(devices) // per_task
        self._cond = threading.Condition()

    def acquire(self) -> list[str]:
        """Take ``per_task`` GPUs (waits until enough are free)."""
        with self._cond:
            while len(self._free) < self.per_task:
                self._cond.wait()
            taken, self._free = self._free[: self.per_task], self._free[self.per_task:]
            return taken

    def release(self, gpus: list[str]) -> None:
        """Give GPUs back."""
        with self._cond:
            self._free.extend(gpus)
            self._cond.notify_all()

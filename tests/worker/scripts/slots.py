"""GPU-slot probe: records the devices this task was given and those of the tasks that
ran at the same time.

Usage: ``python slots.py DIR``. The task announces itself in ``DIR/running/TASK`` (its
``CUDA_VISIBLE_DEVICES``), waits up to 20 s until another task is running too, records
``{"devices", "peers": {task: devices}}`` in ``DIR/seen/TASK.json`` and leaves.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` so that readers never see a partial file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def peers(running: Path, me: str) -> dict[str, str]:
    """Devices of the other tasks running now."""
    out = {}
    for entry in running.iterdir():
        if entry.name.startswith(".") or entry.name == me:
            continue
        try:
            out[entry.name] = entry.read_text()
        except OSError:  # it finished meanwhile
            continue
    return out


def main() -> int:
    """Announce, wait for a peer, record, leave."""
    root = Path(sys.argv[1])
    me = os.environ["DAGQ_TASK"]
    devices = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    running, seen = root / "running", root / "seen"
    running.mkdir(parents=True, exist_ok=True)
    seen.mkdir(parents=True, exist_ok=True)
    write_atomic(running / me, devices)
    found: dict[str, str] = {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found.update(peers(running, me))
        if found:
            break
        time.sleep(0.05)
    time.sleep(0.3)  # stay a moment so that a peer that is just starting sees us too
    found.update(peers(running, me))
    write_atomic(seen / f"{me}.json", json.dumps({"devices": devices, "peers": found}))
    (running / me).unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())

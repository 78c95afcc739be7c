"""A configurable task for the end-to-end tests, run by ``dagq worker`` through the shell.

Every run appends ``WORKFLOW TASK ATTEMPT`` to ``--log`` (one write, so concurrent
tasks never interleave) and publishes ``{"task", "attempt"}`` plus what the flags add.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from dagq.task import get_upstream_outputs, set_output


def main() -> int:
    """Run the step described by the command line; the exit code."""
    p = argparse.ArgumentParser()
    p.add_argument("--log", help="append 'workflow task attempt' to this file")
    p.add_argument("--pidfile", help="write this process's pid here first")
    p.add_argument("--sleep", type=float, default=0.0, help="seconds to sleep")
    p.add_argument("--fail-until", type=int, default=0,
                   help="fail while the attempt number is below this")
    p.add_argument("--require", help="fail unless this file exists")
    p.add_argument("--v", type=int, default=None, help="publish this as 'v'")
    p.add_argument("--pad", type=int, default=0,
                   help="add a string of this many characters as 'pad'")
    p.add_argument("--sum-upstream", action="store_true",
                   help="publish 'total': the sum of the upstream outputs' 'v'")
    args = p.parse_args()
    workflow = os.environ["DAGQ_WORKFLOW_ID"]
    task = os.environ["DAGQ_TASK"]
    attempt = int(os.environ["DAGQ_ATTEMPT"])
    if args.pidfile:
        Path(args.pidfile).write_text(f"{os.getpid()}\n")
    if args.log:
        fd = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{workflow} {task} {attempt}\n".encode())
        finally:
            os.close(fd)
    if args.sleep:
        time.sleep(args.sleep)
    if attempt < args.fail_until:
        print(f"{task}: failing attempt {attempt} on purpose", file=sys.stderr)
        return 1
    if args.require and not Path(args.require).exists():
        print(f"{task}: required file {args.require} is missing", file=sys.stderr)
        return 2
    out: dict[str, Any] = {"task": task, "attempt": attempt}
    if args.v is not None:
        out["v"] = args.v
    if args.pad:
        out["pad"] = "x" * args.pad
    if args.sum_upstream:
        out["total"] = sum(v["v"] for v in get_upstream_outputs().values()
                           if isinstance(v, dict) and "v" in v)
    set_output(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

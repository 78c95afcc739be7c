"""Preemption probe: the first run blocks until it is terminated, the next one succeeds.

Usage: ``python preempt.py DIR [GRACE]``. The first run writes ``DIR/first`` (``pid
attempt``) and sleeps; on SIGTERM it takes GRACE seconds (default 0) as if saving a
checkpoint, writes ``DIR/term`` and exits 143. A later run (another worker taking the
released message) writes ``DIR/second`` (its attempt, and ``after-term`` if the first run
had finished by then, else ``overlap``) and exits 0.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType


def main() -> int:
    """First run: block until SIGTERM. Later runs: succeed."""
    root = Path(sys.argv[1])
    grace = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    attempt = os.environ["DAGQ_ATTEMPT"]
    if (root / "first").exists():
        when = "after-term" if (root / "term").exists() else "overlap"
        (root / "second").write_text(f"{attempt} {when}")
        return 0

    def on_term(signum: int, frame: FrameType | None) -> None:
        time.sleep(grace)
        (root / "term").write_text(f"{os.getpid()} {attempt}")
        sys.exit(143)

    signal.signal(signal.SIGTERM, on_term)
    (root / "first").write_text(f"{os.getpid()} {attempt}")
    time.sleep(120)
    return 1


if __name__ == "__main__":
    sys.exit(main())

"""Preemption probe: the first run blocks until it is terminated, the next one succeeds.

Usage: ``python preempt.py DIR``. The first run writes ``DIR/first`` (``pid attempt``) and
sleeps; on SIGTERM it writes ``DIR/term`` and exits 143. A later run (another worker
taking the released message) writes ``DIR/second`` (``attempt``) and exits 0.
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
    attempt = os.environ["DAGQ_ATTEMPT"]
    if (root / "first").exists():
        (root / "second").write_text(attempt)
        return 0

    def on_term(signum: int, frame: FrameType | None) -> None:
        (root / "term").write_text(f"{os.getpid()} {attempt}")
        sys.exit(143)

    signal.signal(signal.SIGTERM, on_term)
    (root / "first").write_text(f"{os.getpid()} {attempt}")
    time.sleep(120)
    return 1


if __name__ == "__main__":
    sys.exit(main())

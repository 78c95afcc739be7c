"""A task that prints, for the log capture tests.

Usage: ``python chatty.py MODE DIR [ARG]``:

- ``wait``: print ``first``, wait until ``DIR/go`` exists, print ``second``, exit 0.
- ``preempt``: the first run prints ``run-1 attempt A``, writes ``DIR/first`` and blocks
  until SIGTERM, then prints ``got SIGTERM`` and exits 143; a later run prints
  ``run-2 attempt A`` and exits 0.
- ``flood MB``: print about MB megabytes of numbered lines as fast as it can, then
  ``END-OF-FLOOD``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType


def _say(text: str) -> None:
    print(text, flush=True)


def wait(root: Path) -> int:
    """Print, wait for the go file, print again."""
    _say("first")
    deadline = time.monotonic() + 120
    while not (root / "go").exists():
        if time.monotonic() > deadline:
            return 1
        time.sleep(0.05)
    _say("second")
    return 0


def preempt(root: Path) -> int:
    """Block on the first run until terminated; succeed on a later run."""
    attempt = os.environ["DAGQ_ATTEMPT"]
    if (root / "first").exists():
        _say(f"run-2 attempt {attempt}")
        return 0

    def on_term(signum: int, frame: FrameType | None) -> None:
        _say("got SIGTERM")
        sys.exit(143)

    signal.signal(signal.SIGTERM, on_term)
    _say(f"run-1 attempt {attempt}")
    (root / "first").write_text(str(os.getpid()))
    time.sleep(120)
    return 1


def flood(megabytes: int) -> int:
    """About ``megabytes`` MB of numbered 100-byte lines, then an end marker."""
    out = sys.stdout.buffer
    pad = b"x" * 85
    block = 10_000
    for start in range(0, megabytes * 10_000, block):
        out.write(b"".join(b"line %08d %s\n" % (i, pad) for i in range(start, start + block)))
    out.write(b"END-OF-FLOOD\n")
    out.flush()
    return 0


def main() -> int:
    """Dispatch on the mode."""
    mode, root = sys.argv[1], Path(sys.argv[2])
    if mode == "wait":
        return wait(root)
    if mode == "preempt":
        return preempt(root)
    return flood(int(sys.argv[3]))


if __name__ == "__main__":
    sys.exit(main())

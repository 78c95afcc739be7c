"""Directory-sync probe: writes files into ``out/`` (under the task's cwd) over time.

Usage: ``python writer.py DIR MODE``. Files appear atomically (written beside ``out/``,
then renamed into it), so a sync round never sees half a file.

- ``ok``: ``out/a.txt`` and ``out/sub/b.txt``, then wait (up to 60 s) for ``DIR/go``,
  then ``out/c.txt`` and a new ``out/a.txt``; exit 0.
- ``fail``: ``out/x.txt``, then exit 3.
- ``hang``: ``out/y.txt``, then ``DIR/ready``, then sleep until stopped.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

CONTENT = {"a.txt": "first a", "sub/b.txt": "b", "c.txt": "c", "a2": "second a",
           "x.txt": "last words", "y.txt": "partial"}


def put(name: str, text: str) -> None:
    """Write ``out/NAME`` atomically."""
    target = Path("out") / name
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(f".{target.name}.tmp")
    tmp.write_text(text)
    tmp.replace(target)


def main() -> int:
    """Run the mode named on the command line."""
    root, mode = Path(sys.argv[1]), sys.argv[2]
    if mode == "ok":
        put("a.txt", CONTENT["a.txt"])
        put("sub/b.txt", CONTENT["sub/b.txt"])
        deadline = time.monotonic() + 60
        while not (root / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        put("c.txt", CONTENT["c.txt"])
        put("a.txt", CONTENT["a2"])
        return 0
    if mode == "fail":
        put("x.txt", CONTENT["x.txt"])
        return 3
    put("y.txt", CONTENT["y.txt"])
    (root / "ready").write_text("1")
    time.sleep(120)
    return 0


if __name__ == "__main__":
    sys.exit(main())

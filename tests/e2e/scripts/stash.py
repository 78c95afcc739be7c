"""File stashing across tasks: ``stash.py put SIZE`` stores a random file and publishes its
reference and MD5; ``stash.py get`` fetches the upstream ``put`` file and checks it."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

from dagq.task import fetch_file, get_upstream_output, set_output, stash_file


def put(size: int) -> int:
    """Stash ``size`` random bytes; publish ``{"file": ref, "md5", "size"}``."""
    data = os.urandom(size)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "weights.bin"
        path.write_bytes(data)
        ref = stash_file(path)
    set_output({"file": ref, "md5": hashlib.md5(data).hexdigest(), "size": size})
    return 0


def get() -> int:
    """Fetch the file of upstream task ``put``; publish what arrived."""
    made = get_upstream_output("put")
    with tempfile.TemporaryDirectory() as tmp:
        path = fetch_file(made["file"], tmp)
        data = path.read_bytes()
    md5 = hashlib.md5(data).hexdigest()
    set_output({"md5": md5, "size": len(data), "name": path.name})
    if md5 != made["md5"]:
        print(f"fetched file has MD5 {md5}, producer said {made['md5']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(put(int(sys.argv[2])) if sys.argv[1] == "put" else get())

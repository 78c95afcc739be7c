"""Task script: log this execution, then write one unusual output file.

``python bad_output.py KIND LOG``: KIND picks the output (see ``OUTPUTS``); the line
``$DAGQ_WORKFLOW_ID $DAGQ_TASK $DAGQ_ATTEMPT`` is appended to LOG first.
"""

from __future__ import annotations

import os
import sys

OUTPUTS: dict[str, bytes] = {
    "deep": b"[" * 990 + b"1" + b"]" * 990,            # ~2 KB, nested 990 levels
    "surrogate": b'{"v": "\\ud800"}',                   # a lone surrogate escape
    "nan": b'{"x": NaN, "y": Infinity}',                # not JSON, though Python reads it
    "bigint": b"1" * 5000,                              # over Python's 4300-digit limit
    "latin1": b'"caf\xe9"',                             # not UTF-8
    "grows": b"[" + b",".join([b"1E5"] * 7000) + b"]",  # 28 KB that re-encodes to ~63 KB
    "fine": b'{"ok": true}',
}

kind, log = sys.argv[1], sys.argv[2]
with open(log, "a") as f:
    f.write(f"{os.environ['DAGQ_WORKFLOW_ID']} {os.environ['DAGQ_TASK']} "
            f"{os.environ['DAGQ_ATTEMPT']}\n")
with open(os.environ["DAGQ_OUTPUT_FILE"], "wb") as out:
    out.write(OUTPUTS[kind])

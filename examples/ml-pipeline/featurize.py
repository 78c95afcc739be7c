"""Pretend to build features; publish where they are and a few statistics."""

import time

from dagq.task import set_output

time.sleep(0.5)
set_output({"path": "data/features.parquet", "stats": {"rows": 1_000_000, "columns": 128}})

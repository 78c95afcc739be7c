"""The functions of the Python version of the map example (workers import them by
module path, ``examples.map.steps:fit``): the same scan -> fit per shard -> reduce as
pipeline.yaml, with the item handed to ``fit`` as its ``item`` argument."""

from __future__ import annotations

import random
import zlib
from typing import Any


def scan(shards: int = 6) -> dict[str, Any]:
    """Pretend to scan a dataset: its shards, each with a path and a row count."""
    found = [{"path": f"data/part-{k:03d}.csv", "size": 200 + 50 * k} for k in range(shards)]
    return {"shards": found, "rows": sum(s["size"] for s in found)}


def fit(item: dict[str, Any]) -> dict[str, Any]:
    """Fit a line to one shard (made-up data, a noisy y = 2x + 1, seeded by its path)."""
    path, rows = item["path"], item["size"]
    rng = random.Random(zlib.crc32(path.encode()))
    xs = [i / rows for i in range(rows)]
    ys = [2 * x + 1 + rng.gauss(0, 0.05) for x in xs]
    mx, my = sum(xs) / rows, sum(ys) / rows
    slope = (sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
             / sum((x - mx) ** 2 for x in xs))
    intercept = my - slope * mx
    loss = sum(abs(y - (slope * x + intercept)) for x, y in zip(xs, ys, strict=True)) / rows
    return {"path": path, "rows": rows, "slope": round(slope, 3), "loss": round(loss, 4)}


def reduce(inputs: dict[str, Any]) -> dict[str, Any]:
    """Combine the fits: ``inputs["fit"]`` is every instance's output, in shard order."""
    fits = inputs["fit"]
    rows = sum(f["rows"] for f in fits)
    loss = sum(f["loss"] * f["rows"] for f in fits) / rows
    worst = max(fits, key=lambda f: f["loss"])
    return {"shards": len(fits), "rows": rows, "mean_loss": round(loss, 4),
            "worst": worst["path"]}

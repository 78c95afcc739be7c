"""The functions of the Python example pipeline (workers import them by module path).

Each function gets its arguments from the task definition and returns a JSON value,
which becomes the task's output. ``inputs`` (when a function declares it) holds the
outputs of the tasks it depends on, by task name.
"""

from __future__ import annotations

import random
from typing import Any

from dagq.task import get_upstream_output


def load_data(rows: int, seed: int = 0) -> dict[str, list[float]]:
    """A noisy straight line y = 2x + 1 with ``rows`` points."""
    rng = random.Random(seed)
    xs = [i / rows for i in range(rows)]
    return {"x": xs, "y": [2 * x + 1 + rng.gauss(0, 0.05) for x in xs]}


def train(model: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Fit ``model`` ("mean" or "linear") to the data of ``load_data``; report its MAE."""
    data = inputs["load_data"]
    xs, ys = data["x"], data["y"]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    if model == "mean":
        slope, intercept = 0.0, my
    elif model == "linear":
        slope = (sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
                 / sum((x - mx) ** 2 for x in xs))
        intercept = my - slope * mx
    else:
        raise ValueError(f"unknown model {model!r}; use 'mean' or 'linear'")
    mae = sum(abs(y - (slope * x + intercept)) for x, y in zip(xs, ys, strict=True)) / n
    return {"model": model, "slope": round(slope, 3), "mae": round(mae, 4)}


def pick_best(inputs: dict[str, Any]) -> dict[str, Any]:
    """The trained model with the lowest MAE."""
    best = min(inputs.values(), key=lambda result: result["mae"])
    return {"best": best["model"], "mae": best["mae"]}


def report(title: str) -> str:
    """One line about the winner, read with the task helpers instead of ``inputs``."""
    best = get_upstream_output("pick_best")
    return f"{title}: {best['best']} wins with MAE {best['mae']}"

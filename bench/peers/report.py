"""The side-by-side table: each system's median per shape, dagq's first and last runs, and
the ratios dagq / Celery and dagq / best peer, plus the same as one JSON document."""

from __future__ import annotations

import statistics
from typing import Any

from harness import HIGHER_IS_BETTER, SHAPES, UNITS, Sizes

PEERS = ("celery", "dramatiq")
"""The peer systems, in the table's column order."""

LABELS = {"dagq": "dagq", "celery": "Celery", "dramatiq": "dramatiq"}


def medians(run: dict[str, Any]) -> dict[str, float]:
    """A runner result's median figure per shape."""
    return {shape: statistics.median(values) for shape, values in run["figures"].items()}


def _fmt(shape: str, value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.1f}" if UNITS[shape] == "ms/hop" else f"{value:,.0f}"


def _ratio(value: float | None, other: float | None) -> float | None:
    return value / other if value is not None and other else None


def summarise(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per shape: every run's median, dagq's figure for the ratios (the mean of its first
    and last medians), the best peer and the two ratios."""
    med = {label: medians(run) for label, run in runs.items()}
    out: dict[str, dict[str, Any]] = {}
    for shape in SHAPES:
        row: dict[str, Any] = {"unit": UNITS[shape], "higher_is_better": HIGHER_IS_BETTER[shape]}
        for label in ("dagq_first", "dagq_last", *PEERS):
            row[label] = med[label][shape] if label in med else None
        ends = [v for v in (row["dagq_first"], row["dagq_last"]) if v is not None]
        row["dagq"] = statistics.fmean(ends) if ends else None
        peers = {p: row[p] for p in PEERS if row[p] is not None}
        best = (max if HIGHER_IS_BETTER[shape] else min)(peers, key=peers.__getitem__,
                                                         default=None)
        row["best_peer"] = best
        row["dagq_over_celery"] = _ratio(row["dagq"], row["celery"])
        row["dagq_over_best_peer"] = _ratio(row["dagq"], peers[best] if best else None)
        out[shape] = row
    return out


def table(summary: dict[str, dict[str, Any]], sizes: Sizes) -> str:
    """The Markdown table, with a note on how to read the ratios."""
    lines = ["| shape | unit | dagq first / last | Celery | dramatiq | dagq / Celery "
             "| dagq / best peer |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for shape, row in summary.items():
        direction = "higher is better" if row["higher_is_better"] else "lower is better"
        ratio = "—" if row["dagq_over_celery"] is None else f"{row['dagq_over_celery']:.2f}"
        best = "—"
        if row["dagq_over_best_peer"] is not None:
            best = f"{row['dagq_over_best_peer']:.2f} ({LABELS[row['best_peer']]})"
        lines.append(f"| {sizes.describe(shape)} | {row['unit']} ({direction}) "
                     f"| {_fmt(shape, row['dagq_first'])} / {_fmt(shape, row['dagq_last'])} "
                     f"| {_fmt(shape, row['celery'])} | {_fmt(shape, row['dramatiq'])} "
                     f"| {ratio} | {best} |")
    lines += [
        "",
        "Each figure is the median of the repetitions. The ratios divide dagq's figure (the "
        "mean of its first and last medians) by the peer's: for tasks/s a ratio above 1 "
        "means dagq is faster; for the chain (ms per hop) a ratio below 1 means dagq is "
        "faster. The best peer is the one with the better figure for that shape.",
    ]
    return "\n".join(lines)


def reps_table(runs: dict[str, dict[str, Any]]) -> str:
    """Every repetition's figure, one line per run, so the spread is visible."""
    lines = ["| run | " + " | ".join(f"{s} ({UNITS[s]})" for s in SHAPES) + " |",
             "|---|" + "---|" * len(SHAPES)]
    for label, run in runs.items():
        cells = [", ".join(_fmt(s, v) for v in run["figures"][s]) for s in SHAPES]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)

"""Priorities: ``priority: high | normal | low`` (or the band numbers 1, 2, 3) on a task or
a workflow (the default of every task that sets none).

Each band of a queue is a queue of its own: ``gpu`` (normal), ``gpu~high`` and
``gpu~low`` (``~`` never appears in a queue name a user may choose, so band queues never
collide with one). The engine sends an attempt to the band queue of its task
(``band_queue``, decided once per workflow when its graph is built); a worker of ``gpu``
drains the three in the order ``drain_order`` gives (``dagq.worker.bands``).

Starvation rule: a worker takes from the highest band that holds a message, except that
every ``LOW_FIRST_EVERY``-th take starts at ``low`` and every take half-way between
starts at ``normal``. So whenever a lower band holds messages, at least one take in
``LOW_FIRST_EVERY`` goes to ``low`` and one to ``normal`` (each band gets at least
``1/LOW_FIRST_EVERY`` of a busy worker's takes), however much higher-band work arrives.
"""

from __future__ import annotations

from collections.abc import Iterator

from dagq.core.rules import describe

BANDS = ("high", "normal", "low")
"""Every band, highest first."""
NUMBERS = {1: "high", 2: "normal", 3: "low"}
"""Band numbers (lower runs first) and the band each stands for."""
SEPARATOR = "~"
"""Between a queue's name and its band in a band queue's logical name."""
LOW_FIRST_EVERY = 8
"""Every this many takes, a worker looks at ``low`` first (half-way: at ``normal``)."""


def band_of(value: object) -> str:
    """The band a valid ``priority`` value stands for (None: normal)."""
    if value is None:
        return "normal"
    if type(value) is int:
        return NUMBERS[value]
    return str(value)


def priority_problem(value: object) -> str | None:
    """Why ``value`` is not a valid ``priority``, or None."""
    if value is None or (isinstance(value, str) and value in BANDS):
        return None
    if type(value) is int and value in NUMBERS:
        return None
    return (f"priority must be one of high, normal, low (or 1, 2, 3; 1 is highest), got "
            f"{describe(value)}")


def band_queue(queue: str, band: str) -> str:
    """The logical name of ``queue``'s band ``band`` (``queue`` itself for normal)."""
    return queue if band == "normal" else f"{queue}{SEPARATOR}{band}"


def split_band(name: str) -> tuple[str, str]:
    """``(queue, band)`` of a logical queue name (``("gpu", "normal")`` for ``gpu``)."""
    base, sep, band = name.partition(SEPARATOR)
    return (base, band) if sep and band in BANDS else (name, "normal")


def base_queue(name: str) -> str:
    """The queue (hardware class) a logical queue name belongs to."""
    return split_band(name)[0] if SEPARATOR in name else name


def drain_order(take: int) -> tuple[str, ...]:
    """The bands in the order a worker looks at them for its ``take``-th message
    (counted from 0; see the starvation rule in the module docstring)."""
    phase = take % LOW_FIRST_EVERY
    if phase == LOW_FIRST_EVERY - 1:
        return ("low", "high", "normal")
    if phase == LOW_FIRST_EVERY // 2 - 1:
        return ("normal", "high", "low")
    return BANDS


def banded(queues: list[str], tasks_priority: Iterator[tuple[int, object]],
           default: object) -> list[str]:
    """``queues`` (one per task) with each task sent to its band: ``tasks_priority``
    gives ``(index, priority)`` for the tasks that set one, ``default`` is the
    workflow's. The list is returned as it is when no task has a band."""
    fallback = band_of(default)
    out = queues
    if fallback != "normal":
        out = [band_queue(q, fallback) for q in queues]
    for i, value in tasks_priority:
        if value is not None:
            if out is queues:
                out = list(queues)
            out[i] = band_queue(queues[i], band_of(value))
    return out

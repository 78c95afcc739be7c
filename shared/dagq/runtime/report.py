"""What a coordinator reports: its counters, and what it did with a trigger's messages."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class CoordinatorStats:
    """What one coordinator did (printed in its summary line)."""

    counts: Counter[str] = field(default_factory=Counter)

    def line(self) -> str:
        """A one-line summary."""
        keys = ("completions", "controls", "writes", "state_bytes", "conflicts", "dispatched",
                "duplicates", "resent", "dead_lettered")
        return ", ".join(f"{k}={self.counts[k]}" for k in keys)


@dataclass
class Applied:
    """What ``Coordinator.apply_messages`` did with messages a trigger handed over."""

    rejected: list[tuple[str, str]] = field(default_factory=list)
    """``(message id, reason)`` of malformed messages: never retry them."""
    unapplied: list[str] = field(default_factory=list)
    """Workflows whose write kept conflicting: redeliver their messages."""

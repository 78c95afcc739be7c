"""What a worker keeps about each attempt it holds."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from dagq.ports import Message
from dagq.protocol.messages import TaskMessage


@dataclass
class Held:
    """An attempt a worker holds: its message (whose lease the monitor extends), the
    decoded task and the flags that stop it."""

    message: Message
    """The queue message, replaced by each lease extension."""
    task: TaskMessage
    """The decoded task message."""
    stop: threading.Event = field(default_factory=threading.Event)
    """Set to stop the running process."""
    hidden_until: float = 0.0
    """Monotonic time until which the message stays hidden."""
    cancelled: bool = False
    """True once its workflow's cancel reached it."""
    lease: threading.Lock = field(default_factory=threading.Lock)
    """Held while extending; ``finished`` under it means: never extend again."""
    finished: bool = False
    """True once the lease ended: never extend again."""

    def end_lease(self) -> Message:
        """Stop extensions (so none races a release or delete); the current message."""
        with self.lease:
            self.finished = True
            return self.message

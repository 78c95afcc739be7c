"""The coordinator on the Service Bus completion queue (``DAGQ_COORDINATOR_TRIGGER=servicebus``).

The queue has sessions keyed by workflow id, and the trigger is session-enabled and
batched: each instance runs one receive loop that accepts one session (one workflow),
delivers its messages in order in batches, and moves to the next session once the current
one stays empty for ``sessionIdleTimeout``. So no two instances ever work on the same
workflow at once; different workflows scale out over instances, not within one
(docs/functions.md cites the extension's source). Messages are completed when the function
returns and abandoned (redelivered) when it raises.

The batch receive loop never renews the locks of the messages it handed over, so one
invocation must end inside the queue's lock duration (``DAGQ_SB_LOCK_DURATION``, the
completion queue's ``lockDuration``). ``LockBudget`` bounds it: the batch is applied in
order, in chunks sized from how long messages took so far, and no chunk starts once half
the lock duration has passed. Messages not reached by then make the invocation raise
``LockBudgetSpent``: the host abandons the whole batch, Service Bus delivers it again, and
the next invocation skips what was applied as duplicates and carries on.

A poison message cannot be dead-lettered from here (the trigger owns the lock), so it
is logged with its reason and completed; it never blocks the session.
"""

import logging
import math
import time
import typing
from collections.abc import Callable, Mapping, Sequence

import azure.functions as func

from dagq.errors import ConfigError
from dagq.functions import QUEUE_BINDING, new_blueprint
from dagq.functions.completions import Received, RedeliverLater, apply_received
from dagq.functions.runtime import Runtime

log = logging.getLogger("dagq.functions.coordinator")

CONNECTION = "ServiceBusConnection"
"""App setting prefix of the Service Bus connection (``__fullyQualifiedNamespace``)."""
LOCK_SETTING = "DAGQ_SB_LOCK_DURATION"
"""App setting: the completion queue's ``lockDuration`` in seconds."""
DEFAULT_LOCK_S = 300.0
"""The completion queue's lock duration in infra/modules/servicebus.bicep (PT5M, the
largest Service Bus allows)."""
LOCK_RANGE_S = (5.0, 300.0)
"""Lock durations Service Bus accepts, in seconds."""
BUDGET_SHARE = 0.5
"""Share of the lock duration after which no further chunk of a batch is started; the
rest is the margin for the chunk in progress and for settling the batch."""


class LockBudgetSpent(RedeliverLater):
    """Raised when the lock budget ran out before the whole batch was applied."""


class LockBudget:
    """How long one invocation may keep starting work while the trigger holds its locks."""

    def __init__(self, lock_s: float = DEFAULT_LOCK_S, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] = time.sleep) -> None:
        """``lock_s``: the queue's lock duration; ``clock`` and ``sleep`` for tests."""
        self.lock_s = lock_s
        self.seconds = lock_s * BUDGET_SHARE
        self.clock = clock
        self.sleep = sleep
        self._per_message = 0.0  # seconds per message in the latest chunk (0: unknown)

    def chunk(self, left: int, remaining_s: float) -> int:
        """How many of the ``left`` messages to apply next with ``remaining_s`` to go:
        all of them unless the latest rate says they would not fit, and at least one."""
        if self._per_message <= 0.0:
            return left
        return max(1, min(left, math.floor(remaining_s / self._per_message)))

    def observe(self, messages: int, seconds: float) -> None:
        """Record that ``messages`` took ``seconds`` to apply."""
        self._per_message = max(0.0, seconds) / max(1, messages)


def lock_budget(env: Mapping[str, str]) -> LockBudget:
    """The budget for the lock duration the app settings name (``ConfigError`` if bad)."""
    raw = (env.get(LOCK_SETTING) or "").strip()
    if not raw:
        return LockBudget()
    low, high = LOCK_RANGE_S
    try:
        lock_s = float(raw)
    except ValueError:
        lock_s = math.nan
    if not low <= lock_s <= high:
        raise ConfigError(f"{LOCK_SETTING}={raw!r} must be the completion queue's lock "
                          f"duration in seconds, {low:.0f} to {high:.0f} "
                          f"(e.g. {LOCK_SETTING}={DEFAULT_LOCK_S:.0f})")
    return LockBudget(lock_s)


def apply_within(runtime: Runtime, items: Sequence[Received], budget: LockBudget) -> None:
    """Apply ``items`` in order, starting no chunk after ``budget.seconds``; raise
    ``LockBudgetSpent`` when some were left (the host then redelivers the batch)."""
    start = budget.clock()
    deadline = start + budget.seconds

    def hold(seconds: float) -> None:  # an outage hold never outlasts the budget
        budget.sleep(min(seconds, max(0.0, deadline - budget.clock())))

    done = 0
    while done < len(items):
        now = budget.clock()
        if done and now >= deadline:
            log.warning("lock budget of %.0fs spent after %d of %d completion message(s); "
                        "the host redelivers the batch and the applied ones are skipped",
                        budget.seconds, done, len(items))
            raise LockBudgetSpent(f"{len(items) - done} message(s) left for redelivery")
        n = budget.chunk(len(items) - done, deadline - now)
        apply_received(runtime, items[done:done + n], sleep=hold)
        budget.observe(n, budget.clock() - now)
        done += n


def received(message: func.ServiceBusMessage) -> Received:
    """The trigger's message as a ``Received``."""
    return Received(id=str(message.message_id or ""), body=message.get_body(),
                    delivery_count=int(message.delivery_count or 1))


def servicebus_blueprint(runtime: Runtime, budget: LockBudget | None = None) -> func.Blueprint:
    """The Service Bus-triggered coordinator, bound to ``runtime`` (``budget``: default
    from ``DAGQ_SB_LOCK_DURATION``)."""
    bp = new_blueprint()
    limit = lock_budget(runtime.env) if budget is None else budget

    @bp.function_name("coordinator_servicebus")
    @bp.service_bus_queue_trigger(arg_name="messages", connection=CONNECTION,
                                  queue_name=QUEUE_BINDING, is_sessions_enabled=True,
                                  cardinality=func.Cardinality.MANY)
    # The worker matches batch bindings against typing.List annotations.
    def coordinator_servicebus(
            messages: typing.List[func.ServiceBusMessage]) -> None:  # noqa: UP006
        apply_within(runtime, [received(m) for m in messages], limit)

    return bp

"""The coordinator on the Service Bus completion queue (``DAGQ_COORDINATOR_TRIGGER=servicebus``).

The queue has sessions keyed by workflow id, and the trigger is session-enabled and
batched: each instance runs one receive loop that accepts one session (one workflow),
delivers its messages in order in batches, and moves to the next session once the current
one stays empty for ``sessionIdleTimeout``. So no two instances ever work on the same
workflow at once; different workflows scale out over instances, not within one
(docs/functions.md cites the extension's source). Messages are completed when the function
returns and abandoned (redelivered) when it raises.

A poison message cannot be dead-lettered from here (the trigger owns the lock), so it
is logged with its reason and completed; it never blocks the session.
"""

import typing

import azure.functions as func

from dagq.functions import QUEUE_BINDING, new_blueprint
from dagq.functions.completions import Received, apply_received
from dagq.functions.runtime import Runtime

CONNECTION = "ServiceBusConnection"
"""App setting prefix of the Service Bus connection (``__fullyQualifiedNamespace``)."""


def received(message: func.ServiceBusMessage) -> Received:
    """The trigger's message as a ``Received``."""
    return Received(id=str(message.message_id or ""), body=message.get_body(),
                    delivery_count=int(message.delivery_count or 1))


def servicebus_blueprint(runtime: Runtime) -> func.Blueprint:
    """The Service Bus-triggered coordinator, bound to ``runtime``."""
    bp = new_blueprint()

    @bp.function_name("coordinator_servicebus")
    @bp.service_bus_queue_trigger(arg_name="messages", connection=CONNECTION,
                                  queue_name=QUEUE_BINDING, is_sessions_enabled=True,
                                  cardinality=func.Cardinality.MANY)
    # The worker matches batch bindings against typing.List annotations.
    def coordinator_servicebus(
            messages: typing.List[func.ServiceBusMessage]) -> None:  # noqa: UP006
        apply_received(runtime, [received(m) for m in messages])

    return bp

"""The coordinator on the Storage Queue completion queue
(``DAGQ_COORDINATOR_TRIGGER=storage_queue``), for deployments without Service Bus.

The host decodes the base64 the backend writes and hands over one message per call;
host.json (``batchSize`` 1, ``newBatchThreshold`` 0) keeps one call at a time per
instance. Instances can still overlap on one workflow: the ETag compare-and-swap makes
that safe, at the cost of retried writes. A poison message is moved to the store's
dead-letter queue with its reason and acknowledged.
"""

import logging

import azure.functions as func

from dagq.errors import DagqError
from dagq.functions import QUEUE_BINDING, new_blueprint
from dagq.functions.completions import PoisonSink, Received, apply_received
from dagq.functions.runtime import Runtime
from dagq.ports import Message
from dagq.protocol.names import COMPLETIONS

CONNECTION = "AzureWebJobsStorage"
"""App setting prefix of the storage connection (``__accountName`` with an identity)."""

log = logging.getLogger("dagq.functions.coordinator")


def received(message: func.QueueMessage) -> Received:
    """The trigger's message as a ``Received``."""
    return Received(id=str(message.id or ""), body=message.get_body(),
                    delivery_count=int(message.dequeue_count or 1),
                    receipt=message.pop_receipt)


def _dead_letter(runtime: Runtime) -> PoisonSink:
    def sink(message: Received, reason: str) -> None:
        if not message.receipt:
            return  # logged by apply_received; nothing to move without a pop receipt
        queue = runtime.backend().queues.get(COMPLETIONS)
        try:
            queue.dead_letter(Message(id=message.id, body=message.body,
                                      receipt=message.receipt,
                                      delivery_count=message.delivery_count), reason)
        except DagqError as exc:  # the log line above already keeps the reason
            log.warning("could not move poison message %s to the dead-letter queue: %s",
                        message.id, exc)
    return sink


def storage_queue_blueprint(runtime: Runtime) -> func.Blueprint:
    """The Storage Queue-triggered coordinator, bound to ``runtime``."""
    bp = new_blueprint()
    poison = _dead_letter(runtime)

    @bp.function_name("coordinator_queue")
    @bp.queue_trigger(arg_name="message", queue_name=QUEUE_BINDING, connection=CONNECTION)
    def coordinator_queue(message: func.QueueMessage) -> None:
        apply_received(runtime, [received(message)], poison)

    return bp

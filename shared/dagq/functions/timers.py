"""The repair timer: what the long-running ``dagq coordinator`` does between batches.

Each run applies pending cancel requests, starts workflows left ``pending`` by a crashed
submitter, re-sends outbox entries whose writer crashed before clearing them, and fails
tasks past their timeout (all in ``Coordinator.sweep``), then clears what it sent from
the outbox. Any instance may run it; the ETag compare-and-swap keeps it safe next to
the coordinator trigger.
"""

import logging
import math
import time

import azure.functions as func

from dagq.functions import new_blueprint
from dagq.functions.runtime import Runtime
from dagq.runtime.webhooks import Deliverer

log = logging.getLogger("dagq.functions.timers")


DELIVERY_BUDGET_S = 20.0
"""How long one timer run spends making waiting webhook deliveries at most (each POST
has its own timeout, ``DAGQ_WEBHOOK_TIMEOUT``); what is left waits for the next run."""


def repair(runtime: Runtime) -> None:
    """One sweep of this thread's coordinator, then an outbox flush, then the webhook
    deliveries waiting in the ``notifications`` queue (docs/notifications.md): on the
    Function App this timer is what makes them."""
    coord = runtime.coordinator()
    try:
        coord.sweep(runtime.clock())
    finally:
        coord.flush(math.inf)
    log.info("repair sweep done: %s", coord.stats.line())
    deliver(runtime)


def deliver(runtime: Runtime, budget_s: float = DELIVERY_BUDGET_S) -> int:
    """Make waiting webhook deliveries for up to ``budget_s``; how many messages came."""
    deliverer = Deliverer(runtime.backend(), environ=runtime.env)
    end = time.monotonic() + budget_s
    total = 0
    while time.monotonic() < end and (n := deliverer.drain()):
        total += n
    return total


def timers_blueprint(runtime: Runtime, schedule: str) -> func.Blueprint:
    """The repair sweep on ``schedule`` (NCRONTAB with a seconds field)."""
    bp = new_blueprint()

    @bp.function_name("repair_sweep")
    @bp.timer_trigger(arg_name="timer", schedule=schedule, run_on_startup=False,
                      use_monitor=False)
    def repair_sweep(timer: func.TimerRequest) -> None:
        if timer.past_due:
            log.info("repair sweep is running late")
        repair(runtime)

    return bp

"""The repair timer: what the long-running ``dagq coordinator`` does between batches.

Each run applies pending cancel requests, starts workflows left ``pending`` by a crashed
submitter, re-sends outbox entries whose writer crashed before clearing them, and fails
tasks past their timeout (all in ``Coordinator.sweep``), then clears what it sent from
the outbox. Any instance may run it; the ETag compare-and-swap keeps it safe next to
the coordinator trigger.
"""

import logging
import math

import azure.functions as func

from dagq.functions import new_blueprint
from dagq.functions.runtime import Runtime

log = logging.getLogger("dagq.functions.timers")


def repair(runtime: Runtime) -> None:
    """One sweep of this thread's coordinator, then an outbox flush."""
    coord = runtime.coordinator()
    try:
        coord.sweep(runtime.clock())
    finally:
        coord.flush(math.inf)
    log.info("repair sweep done: %s", coord.stats.line())


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

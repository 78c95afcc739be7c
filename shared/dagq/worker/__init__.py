"""The dagq worker: runs task messages from one queue through processors."""

from dagq.worker.processors import Outcome, Processor, TaskContext

__all__ = ["Outcome", "Processor", "TaskContext"]

"""Poison isolation: a completion that cannot be applied or written harms only its workflow.

The coordinator applies a batch per workflow. When a workflow's group raises anything
but a transient store error (a value the state encoder cannot carry, a bug tripped by
odd input, a state that no longer decodes), ``isolate`` takes over for that group only:

1. each message is applied on its own, so the good ones still count;
2. a completion that still fails is replaced by a failed completion of the same attempt
   whose error says what was wrong (the task fails, its retries and policies apply);
3. if even that cannot be written, the workflow itself is marked ``failed`` in the index
   with the reason; its messages are then acknowledged, never redelivered for ever.

``screen`` runs before any of that on every completion: an output that is not a
canonical value (see ``dagq.core.values``) fails its task at once with the rule it broke.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from dagq.core import engine, values
from dagq.core.error_summary import clip_error
from dagq.outage import TRANSIENT
from dagq.protocol import names
from dagq.protocol.messages import CompletionMessage, CompletionQueueMessage, attempt_named_in
from dagq.runtime.committing import Committing, Mutation
from dagq.runtime.states import StateWriter

log = logging.getLogger("dagq.coordinator")

MAX_ERROR_CHARS = 4000
"""Longest error text kept from a completion (its header and its end are kept: what
its error summary reads, ``dagq.core.error_summary``)."""


def clean_text(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` as valid UTF-8 and at most ``limit`` characters (header and end kept)."""
    return values.utf8_text(clip_error(text, limit), limit)


def screen(item: CompletionQueueMessage) -> CompletionQueueMessage:
    """``item``, or a failed completion of the same attempt if its output is unusable."""
    if not isinstance(item, CompletionMessage):
        return item
    if item.error is not None and (values.string_problem(item.error) is not None
                                   or len(item.error) > MAX_ERROR_CHARS):
        item = replace(item, error=clean_text(item.error))
    try:
        values.check(item.output, "the task's output")
    except values.ValueRejected as exc:
        return rejected(item, str(exc))
    return item


def rejected(item: CompletionMessage, why: str) -> CompletionMessage:
    """A failed completion of ``item``'s attempt saying why its result was refused."""
    return CompletionMessage(
        item.workflow_id, item.task, item.attempt, success=False,
        error=f"the coordinator refused this attempt's result: {clean_text(why, 1000)}",
        worker=item.worker, duration_s=item.duration_s)


def isolate(commits: Committing, writer: StateWriter, workflow_id: str,
            items: list[CompletionQueueMessage],
            exc: BaseException) -> list[engine.Effects] | None:
    """Apply ``items`` one by one after their group failed with ``exc`` (see the module
    docstring). Returns the effects, or None if a write kept conflicting."""
    log.error("workflow %s: applying %d message(s) failed (%s: %s); isolating them",
              workflow_id, len(items), type(exc).__name__, exc)
    writer.forget(workflow_id)
    effects: list[engine.Effects] = []
    for item in items:
        try:
            done = commits.commit(workflow_id, commits.applier([item]))
        except TRANSIENT:
            raise
        except Exception as first:
            writer.forget(workflow_id)
            done = _fallback(commits, writer, workflow_id, item, first)
        if done is None:
            return None
        effects.extend(done)
    return effects


def _fallback(commits: Committing, writer: StateWriter, workflow_id: str,
              item: CompletionQueueMessage, exc: BaseException) -> list[engine.Effects] | None:
    why = f"{type(exc).__name__}: {exc}"
    if isinstance(item, CompletionMessage):
        log.error("workflow %s: failing task %s attempt %d: its completion could not be "
                  "applied (%s)", workflow_id, item.task, item.attempt, why)
        try:
            return commits.commit(workflow_id, commits.applier([rejected(item, why)]))
        except TRANSIENT:
            raise
        except Exception as again:
            writer.forget(workflow_id)
            why = f"{type(again).__name__}: {again}"
    else:
        log.error("workflow %s: dropping control message %s (%s)", workflow_id,
                  item.action, why)
        return []
    fail_workflow(writer, workflow_id, why)
    return []


def fail_workflow(writer: StateWriter, workflow_id: str, why: str) -> None:
    """Mark a workflow whose state cannot be read, updated or written as failed."""
    log.error("workflow %s: failing the workflow: its state cannot be updated (%s)",
              workflow_id, why)
    try:
        writer.mark_failed(workflow_id)
    except TRANSIENT:
        raise
    except Exception as exc:
        log.error("workflow %s: could not mark it failed either: %s", workflow_id, exc)


def guarded(commits: Committing, writer: StateWriter, workflow_id: str,
            mutate: Mutation) -> None:
    """``commits.commit`` for periodic work: a workflow whose state cannot be updated is
    failed instead of stopping the sweep for every other workflow."""
    try:
        commits.commit(workflow_id, mutate)
    except TRANSIENT:
        raise
    except Exception as exc:
        writer.forget(workflow_id)
        fail_workflow(writer, workflow_id, f"{type(exc).__name__}: {exc}")


def undecodable(commits: Committing, message_id: str, body: bytes | str,
                reason: str) -> None:
    """Fail the attempt a malformed completion reported, when its head or its id (a
    worker's ``done_id``) names it, so that its workflow does not wait for ever."""
    target = attempt_named_in(body) or names.attempt_of_done_id(message_id)
    if target is None:
        return
    workflow_id, task, attempt = target
    item = CompletionMessage(workflow_id, task, attempt, success=False)
    commits.commit_group(workflow_id, [rejected(item, f"its completion is malformed: {reason}")])

"""One object version -> at most one run: ``run_id`` and ``fire``.

The workflow id of a run is derived from the trigger name, the object's path and its
version (a blob's ETag or version id; a local file's mtime and size), and the run is
submitted with ``WorkflowClient.submit(workflow_id=...)``, which is idempotent per id.
So an Event Grid event delivered twice, two Function instances handling the same blob,
or a watcher restarted over files it already saw submit nothing new (``created=False``),
while a new version of the same blob gets a new id and a second run.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from dagq.client import WorkflowClient
from dagq.errors import DefinitionError, IdConflict
from dagq.triggers.store import Trigger

log = logging.getLogger("dagq.triggers")

RUN_PREFIX = "trig"
"""First part of every run id a trigger starts: ``trig-{name}-{digest}``."""


def run_id(trigger: str, path: str, version: str) -> str:
    """``trig-{trigger}-{24 hex digits}``: the same trigger, path and version always give
    the same id (a valid workflow id, blob name and Table key)."""
    digest = hashlib.sha256(f"{trigger}\0{path}\0{version}".encode()).hexdigest()[:24]
    return f"{RUN_PREFIX}-{trigger}-{digest}"


@dataclass(frozen=True)
class Fired:
    """One run asked for by a trigger."""

    trigger: str
    path: str
    version: str
    run_id: str
    created: bool
    """False when the run already existed (a duplicate event, or a restarted watcher)."""
    error: str = ""
    """Why the submission was refused (then nothing was started)."""

    def to_json(self) -> dict[str, object]:
        """``{"trigger", "path", "version", "run_id", "created"[, "error"]}``."""
        out: dict[str, object] = {"trigger": self.trigger, "path": self.path,
                                  "version": self.version, "run_id": self.run_id,
                                  "created": self.created}
        if self.error:
            out["error"] = self.error
        return out


def fire(client: WorkflowClient, trigger: Trigger, path: str, version: str) -> Fired:
    """Submit the run of ``trigger`` for the object at ``path`` in ``version``.

    A run the client refuses (bad parameter value, id conflict) is reported in
    ``Fired.error`` rather than raised: a re-delivered event would fail the same way.
    Store errors are raised, so the event is delivered again (or the file polled again)."""
    rid = run_id(trigger.name, path, version)
    extra = {"trigger": trigger.name, "trigger_path": path, "trigger_version": version}
    try:
        done = client.submit(trigger.definition, workflow_id=rid, extra=extra,
                             params={trigger.param: path})
    except (DefinitionError, IdConflict) as exc:
        log.error("trigger %r: run for %s (version %s) refused: %s", trigger.name, path,
                  version, exc)
        return Fired(trigger.name, path, version, rid, False, str(exc)[:500])
    if done.created:
        log.info("trigger %r: started %s for %s (version %s)", trigger.name, rid, path,
                 version)
    return Fired(trigger.name, path, version, rid, done.created)


def fire_matching(client: WorkflowClient, triggers: Iterable[Trigger], source: str,
                  path: str, version: str) -> list[Fired]:
    """``fire`` every trigger of ``source`` whose prefix ``path`` starts with."""
    return [fire(client, t, path, version) for t in triggers if t.matches(source, path)]

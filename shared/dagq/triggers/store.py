"""Trigger definitions stored as data: ``TriggerStore`` (add, get, list, remove) over
the ``Records`` partition ``triggers``, one record per trigger (key = name).

A trigger is ``{name, source, prefix, param, definition}``: when an object whose path
starts with ``prefix`` appears (a local file for ``source=files``, a blob
``CONTAINER/NAME`` for ``source=blob``), one run of ``definition`` starts with the
object's path as parameter ``param`` (see ``dagq.triggers.fire``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from dagq.core.model import WorkflowDef
from dagq.core.params import apply_params
from dagq.core.parse import canonical_json, definition_from_dict, definition_to_dict
from dagq.core.validate import validate
from dagq.errors import AlreadyExists, ConfigError, DagqError, DefinitionError, NotFound
from dagq.ports import Backend

PARTITION = "triggers"
"""The ``Records`` partition holding one record per trigger."""
MAX_DEFINITION_CHARS = 30_000
"""Largest canonical definition a trigger holds inline (Table Storage property limit)."""
SOURCES = ("files", "blob")
Source = Literal["files", "blob"]
_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?")
_PARAM = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_NEW = "*new"


class TriggerError(DagqError):
    """A trigger that cannot be added or whose record is damaged."""


class TriggerNotFound(NotFound):
    """No trigger has the given name (exit 5 on the CLI, 404 over HTTP)."""


@dataclass(frozen=True)
class Trigger:
    """A stored trigger."""

    name: str
    """Lower-case letters, digits and '-', 1-40 characters (part of every run id)."""
    source: Source
    """``files`` (a local path prefix, watched by polling) or ``blob`` (``CONTAINER/PREFIX``
    of the store's storage account, delivered by Event Grid to the Function App)."""
    prefix: str
    """Objects whose path starts with this start a run."""
    param: str
    """The run parameter that receives the object's path."""
    definition: WorkflowDef
    created_at: datetime

    def matches(self, source: str, path: str) -> bool:
        """Whether an object at ``path`` of ``source`` starts a run of this trigger."""
        return source == self.source and path.startswith(self.prefix)

    @property
    def container(self) -> str:
        """For ``blob`` triggers: the container part of the prefix."""
        return self.prefix.split("/", 1)[0]

    def to_record(self) -> dict[str, Any]:
        """The stored JSON record."""
        return {"v": 1, "name": self.name, "source": self.source, "prefix": self.prefix,
                "param": self.param, "definition": definition_to_dict(self.definition),
                "created_at": self.created_at.astimezone(UTC).isoformat()}

    @staticmethod
    def from_record(value: dict[str, Any]) -> Trigger:
        """The trigger a record holds (``TriggerError`` when it is damaged)."""
        try:
            name = str(value["name"])
            return Trigger(name=name, source=value["source"], prefix=str(value["prefix"]),
                           param=str(value["param"]),
                           definition=definition_from_dict(value["definition"],
                                                           source=f"trigger {name!r}"),
                           created_at=datetime.fromisoformat(value["created_at"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise TriggerError(f"a stored trigger record is damaged ({exc!r}); remove it and "
                               "add it again") from None


def check_trigger(trigger: Trigger) -> None:
    """Raise ``TriggerError``/``DefinitionError`` for a trigger that cannot be stored."""
    if not _NAME.fullmatch(trigger.name):
        raise TriggerError(f"trigger name {trigger.name!r} is invalid: use 1-40 lower-case "
                           "letters, digits or '-', starting and ending with a letter or digit")
    if trigger.source not in SOURCES:
        raise TriggerError(f"trigger source {trigger.source!r} is not one of "
                           f"{', '.join(SOURCES)}")
    if not _PARAM.fullmatch(trigger.param):
        raise TriggerError(f"parameter name {trigger.param!r} is invalid: use letters, digits "
                           "and '_', starting with a letter or '_'")
    if not trigger.prefix:
        raise TriggerError("the prefix is empty; give a directory (files) or "
                           "CONTAINER/PATH/ (blob)")
    if trigger.source == "blob" and "/" not in trigger.prefix:
        raise TriggerError(f"blob prefix {trigger.prefix!r} must start with the container: "
                           "CONTAINER/ or CONTAINER/PATH/")
    problems = validate(apply_params(trigger.definition, {trigger.param: trigger.prefix}))
    if problems:
        raise DefinitionError(problems, source=f"trigger {trigger.name!r}")
    if len(canonical_json(trigger.definition)) > MAX_DEFINITION_CHARS:
        raise TriggerError(f"the definition of trigger {trigger.name!r} is larger than "
                           f"{MAX_DEFINITION_CHARS} characters; use a smaller workflow that "
                           "starts a child workflow")


class TriggerStore:
    """Triggers in ``backend.records`` (partition ``triggers``)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.records = backend.records

    def add(self, trigger: Trigger) -> Trigger:
        """Store a new trigger; ``TriggerError`` when the name is taken or it is invalid."""
        check_trigger(trigger)
        try:
            self.records.put(PARTITION, trigger.name, trigger.to_record(), etag=_NEW)
        except AlreadyExists:
            raise TriggerError(f"a trigger named {trigger.name!r} already exists; remove it "
                               f"first (`dagq trigger remove {trigger.name}`)") from None
        return trigger

    def get(self, name: str) -> Trigger:
        """The trigger called ``name`` (``TriggerNotFound``)."""
        try:
            value, _ = self.records.get(PARTITION, name)
        except NotFound:
            raise TriggerNotFound(f"no trigger named {name!r} (see `dagq trigger list`)") \
                from None
        return Trigger.from_record(value)

    def list(self, source: str | None = None) -> list[Trigger]:
        """Every trigger (of ``source`` when given), ordered by name."""
        found = [Trigger.from_record(v) for _, v in self.records.list(PARTITION)]
        return [t for t in found if source is None or t.source == source]

    def remove(self, name: str) -> None:
        """Delete ``name`` (``TriggerNotFound`` when absent). Runs it started stay."""
        self.get(name)
        self.records.delete(PARTITION, name)


def default_source(store_url: str) -> Source:
    """``blob`` on an Azure store, ``files`` on the embedded one."""
    return "blob" if store_url.startswith("azure:") else "files"


def parse_source(text: str) -> Source:
    """``files`` or ``blob`` (``ConfigError`` otherwise)."""
    if text == "files":
        return "files"
    if text == "blob":
        return "blob"
    raise ConfigError(f"trigger source {text!r} is not one of {', '.join(SOURCES)}")

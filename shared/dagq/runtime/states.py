"""The one writer of workflow states and of their index rows' progress.

Every state write of the runtime and of submission goes through ``StateWriter``: the
coordinator's batches and repairs (a cached copy, a journal delta), cancel and retry
(``dagq.runtime.control``: a fresh read, a full snapshot) and a submission's first write
(``create``). It owns reading a state (an LRU cache of the latest copies, each checked
against the store with one small ETag request before "nothing to do" is decided on it),
the compare-and-swap write and its retries when another writer won, forgetting a copy
that may be half-mutated, and the index row's status and counts (rate-limited for
progress-only changes) including marking a workflow failed.

It is named for what it writes, not for who calls it, and it knows nothing of queues,
outboxes or the coordinator: what a write decides to send is its caller's business. Its
clock and its counters are given to it, so a coordinator's summary counts its writes.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from dagq.core.engine import WorkflowState, loads
from dagq.core.engine.codec import encode_state
from dagq.core.engine.journal import encode_write, mark_stored
from dagq.core.model import TERMINAL_WORKFLOW_STATUSES
from dagq.errors import NotFound, PreconditionFailed, StoreError
from dagq.ports import Backend, StateStore

log = logging.getLogger("dagq.coordinator")

MAX_CONFLICT_RETRIES = 8
"""Writes of one ``commit`` that may lose to another writer before it gives up."""
CACHE_SIZE = 256
"""States kept in memory (least recently used dropped first)."""

R = TypeVar("R")

Edit = Callable[[WorkflowState], tuple[R, bool]]
"""Changes a state in place; returns what the caller wants back and whether the state must
be written (False: it is unchanged, or only changed in a way not worth a write)."""


class KeptChanging(StoreError):
    """Raised when every try of a ``commit`` lost the write to another writer."""


class StateGone(NotFound):
    """Raised when a state was deleted between its read and its write."""


@dataclass
class Loaded:
    """A state and the ETag the store holds it under."""

    state: WorkflowState
    etag: str


@dataclass
class Commit(Generic[R]):
    """What ``StateWriter.commit`` did: the state as stored, its ETag, what the edit
    returned, and whether a write happened."""

    state: WorkflowState
    etag: str
    result: R
    written: bool


def write_state(states: StateStore, workflow_id: str, state: WorkflowState, etag: str,
                *, snapshot: bool = False) -> tuple[str, int]:
    """Store what ``state`` changed under ``etag`` (``dagq.core.engine.journal`` chooses a
    delta or a new snapshot; ``snapshot`` forces the latter); the new ETag and the bytes
    written. Raises what the store raises (``PreconditionFailed``, ``NotFound``, outages);
    after any error the caller must drop ``state``: its change records no longer match."""
    kind, data = ("replace", encode_state(state)) if snapshot else \
        encode_write(state, states.max_journal, min_tasks=states.delta_tasks)
    if kind == "append":
        new = states.append(workflow_id, data, etag)
        mark_stored(state, None, len(data))
    else:
        new = states.replace(workflow_id, data, etag)
        mark_stored(state, len(data))
    return new, len(data)


class StateWriter:
    """Reads, caches and writes the workflow states and index rows of ``backend``."""

    def __init__(self, backend: Backend, *, clock: Callable[[], float] = time.time,
                 counts: Counter[str] | None = None, index_interval: float = 0.0,
                 cache_size: int = CACHE_SIZE) -> None:
        """``counts`` receives ``writes``, ``state_bytes`` and ``conflicts``;
        ``index_interval`` is the least time between two index updates that change only
        the counts (``DAGQ_INDEX_INTERVAL``; the rest wait for ``flush_index``)."""
        self.backend = backend
        self.clock = clock
        self.counts: Counter[str] = Counter() if counts is None else counts
        self.index_interval = index_interval
        self.cache_size = cache_size
        self._cache: OrderedDict[str, Loaded] = OrderedDict()
        self._index_seen: dict[str, tuple[tuple[str, tuple[tuple[str, int], ...]], float]] = {}
        self._index_dirty: dict[str, WorkflowState] = {}
        self._lock = threading.RLock()

    # -- reading -------------------------------------------------------------------------
    def read(self, workflow_id: str) -> Loaded | None:
        """The stored state, read and decoded now (never from the cache); None if the
        workflow has no state."""
        try:
            data, etag = self.backend.states.read(workflow_id)
        except NotFound:
            return None
        return Loaded(loads(data), etag)

    def load(self, workflow_id: str) -> Loaded | None:
        """The cached copy if there is one (possibly stale: a write finds out), else
        ``read``."""
        return self.cached(workflow_id) or self.read(workflow_id)

    def exists(self, workflow_id: str) -> bool:
        """True if ``workflow_id`` has a stored state (decodable or not)."""
        try:
            self.backend.states.read(workflow_id)
        except NotFound:
            return False
        return True

    def still_stored(self, workflow_id: str, etag: str) -> bool:
        """True if the stored state is still the one read or written under ``etag``: one
        small request instead of reading and decoding the whole state again."""
        try:
            return self.backend.states.etag(workflow_id) == etag
        except NotFound:
            return False

    # -- the cache -----------------------------------------------------------------------
    def cached(self, workflow_id: str) -> Loaded | None:
        """The cached copy of ``workflow_id``, if any."""
        with self._lock:
            return self._cache.get(workflow_id)

    def caches(self, workflow_id: str) -> bool:
        """True if a copy of ``workflow_id``'s state is cached."""
        return self.cached(workflow_id) is not None

    def cached_states(self) -> list[WorkflowState]:
        """The cached states (a copy of the list)."""
        with self._lock:
            return [c.state for c in self._cache.values()]

    def remember(self, workflow_id: str, loaded: Loaded) -> None:
        """Cache ``loaded`` as the latest copy of ``workflow_id``."""
        with self._lock:
            self._cache[workflow_id] = loaded
            self._cache.move_to_end(workflow_id)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def forget(self, workflow_id: str) -> None:
        """Drop the cached state of ``workflow_id`` (it may be half-mutated)."""
        with self._lock:
            self._cache.pop(workflow_id, None)

    # -- writing -------------------------------------------------------------------------
    def commit(self, workflow_id: str, edit: Edit[R], *, cached: bool = True,
               snapshot: bool = False, tries: int = MAX_CONFLICT_RETRIES) -> Commit[R] | None:
        """Load the state, ``edit`` it and write it under its ETag; after a lost race,
        load it again and edit that, up to ``tries`` times (then ``KeptChanging``).

        With ``cached`` the cached copy is used and the result cached; an edit that asks
        for no write on a cached copy is redone on a fresh read if the store moved on
        meanwhile, so that "nothing to do" is decided on the stored state. Without it the
        state is read fresh and the cache left alone. ``snapshot`` writes a full snapshot
        instead of a journal delta. None if the workflow has no state; ``StateGone`` if it
        was deleted before the write. Whatever ``edit`` raises propagates (the caller
        forgets the copy it may have half-changed)."""
        for _ in range(tries):
            loaded = self.cached(workflow_id) if cached else None
            from_cache = loaded is not None
            if loaded is None:
                loaded = self.read(workflow_id)
                if loaded is None:
                    return None
            state = loaded.state
            result, write = edit(state)
            if not write:
                if from_cache and not self.still_stored(workflow_id, loaded.etag):
                    # another writer stored a newer state: decide on that one
                    self.forget(workflow_id)
                    del state, loaded, result  # let the stale copy go before the re-read
                    continue
                if cached and not from_cache:  # read and unchanged: the next look is cheap
                    self.remember(workflow_id, loaded)
                return Commit(state, loaded.etag, result, written=False)
            try:
                etag, written = write_state(self.backend.states, workflow_id, state,
                                            loaded.etag, snapshot=snapshot)
            except PreconditionFailed:
                self.counts["conflicts"] += 1
                self.forget(workflow_id)
                del state, loaded, result
                continue
            except NotFound:
                self.forget(workflow_id)
                raise StateGone(f"workflow {workflow_id!r} was deleted") from None
            except BaseException:
                self.forget(workflow_id)  # its change records no longer match the store
                raise
            self.counts["writes"] += 1
            self.counts["state_bytes"] += written
            if cached:
                self.remember(workflow_id, Loaded(state, etag))
            return Commit(state, etag, result, written=True)
        raise KeptChanging(f"workflow {workflow_id!r} kept changing during {tries} "
                           "attempts to write it; try again")

    def create(self, workflow_id: str, state: WorkflowState) -> str:
        """Store a new workflow's first state (a snapshot); its ETag. ``AlreadyExists``
        if the workflow has a state already."""
        data = encode_state(state)
        etag = self.backend.states.create(workflow_id, data)
        mark_stored(state, len(data))
        return etag

    # -- the index row -------------------------------------------------------------------
    def update_index(self, state: WorkflowState, now: float, force: bool = False) -> None:
        """Write status and counts to the index row: at once when the status changes,
        otherwise at most every ``index_interval`` seconds (the rest by ``flush_index``)."""
        counts = state.counts()
        key = (state.status, tuple(sorted(counts.items())))
        seen = self._index_seen.get(state.workflow_id)
        if seen is not None and seen[0] == key:
            with self._lock:
                self._index_dirty.pop(state.workflow_id, None)
            return
        if (not force and seen is not None and seen[0][0] == state.status
                and now - seen[1] < self.index_interval):
            with self._lock:
                self._index_dirty[state.workflow_id] = state
            return
        try:
            self.backend.index.update_progress(
                state.workflow_id, status=state.status, counts=counts, updated_at=now)
        except NotFound:
            log.warning("workflow %s has a state but no index row", state.workflow_id)
            return
        with self._lock:
            self._index_seen[state.workflow_id] = (key, now)
            self._index_dirty.pop(state.workflow_id, None)
        if state.status in TERMINAL_WORKFLOW_STATUSES:
            log.info("workflow %s %s %s", state.workflow_id, state.status, dict(counts))

    def flush_index(self, now: float) -> None:
        """Write the counts ``update_index`` held back for ``index_interval`` or longer."""
        with self._lock:
            dirty = [s for wf, s in self._index_dirty.items()
                     if now - self._index_seen.get(wf, ((), 0.0))[1] >= self.index_interval]
        for state in dirty:
            self.update_index(state, self.clock(), force=True)

    def put_progress(self, state: WorkflowState) -> None:
        """Write status and counts to the index row now, whatever was written before; a
        missing row is left alone (the coordinator reports it)."""
        with contextlib.suppress(NotFound):
            self.backend.index.update_progress(state.workflow_id, status=state.status,
                                               counts=state.counts(), updated_at=self.clock())

    def mark_failed(self, workflow_id: str, counts: Mapping[str, int] | None = None,
                    now: float | None = None) -> None:
        """Set the index row's status to ``failed`` (a workflow whose state cannot be
        stored, read or updated), keeping ``counts`` (by default the row's own)."""
        index = self.backend.index
        if counts is None:
            counts = index.get(workflow_id).counts
        index.update_progress(workflow_id, status="failed", counts=counts,
                              updated_at=self.clock() if now is None else now)

"""Event triggers on the embedded store: the trigger records, the deterministic run ids,
and the polling watcher starting one run per file version (also across restarts)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dagq.backends.sqlite import SqliteBackend
from dagq.client import WorkflowClient
from dagq.errors import DefinitionError
from dagq.triggers.fire import run_id
from dagq.triggers.store import TriggerError, TriggerNotFound, TriggerStore
from dagq.triggers.watcher import Watcher
from tests.triggers.conftest import make_trigger


def runs(backend: SqliteBackend) -> list[str]:
    return sorted(r["id"] for r in WorkflowClient(backend).list_workflows())


def test_store_roundtrip_and_checks(backend: SqliteBackend, tmp_path: Path) -> None:
    store = TriggerStore(backend)
    t = store.add(make_trigger(f"{tmp_path}/inbox/"))
    assert store.get("inbox") == t
    assert [x.name for x in store.list("files")] == ["inbox"] and store.list("blob") == []
    with pytest.raises(TriggerError, match="already exists"):
        store.add(t)
    with pytest.raises(TriggerError, match="must start with the container"):
        store.add(make_trigger("inbox", name="b", source="blob"))
    with pytest.raises(TriggerError, match="name"):
        store.add(make_trigger("x/", name="Bad_Name"))
    store.remove("inbox")
    with pytest.raises(TriggerNotFound):
        store.get("inbox")


def test_definition_is_validated_with_the_param(backend: SqliteBackend) -> None:
    from dataclasses import replace

    from dagq.core.parse import load_definition

    strict = load_definition("name: x\nparameters: {path: {type: integer}}\ntasks:\n"
                             "  - {name: a, kwargs: {cmd: 'echo {params.path}'}}\n")
    with pytest.raises(DefinitionError):
        TriggerStore(backend).add(replace(make_trigger("c/"), definition=strict))


def test_run_id_is_deterministic_and_valid() -> None:
    a = run_id("inbox", "c/a.csv", "0x1")
    assert a == run_id("inbox", "c/a.csv", "0x1")
    assert len({a, run_id("inbox", "c/a.csv", "0x2"), run_id("inbox", "c/b.csv", "0x1"),
                run_id("other", "c/a.csv", "0x1")}) == 4
    assert a.startswith("trig-inbox-")


def test_one_run_per_file_version(backend: SqliteBackend, tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    TriggerStore(backend).add(make_trigger(f"{inbox}/"))
    (tmp_path / "elsewhere.csv").write_text("not watched")
    watcher = Watcher(backend, settle_s=0)
    assert watcher.poll() == []
    data = inbox / "a.csv"
    data.write_text("1,2,3\n")
    [first] = watcher.poll()
    assert first.created and first.path == str(data)
    assert watcher.poll() == []  # same version: nothing
    # a restarted watcher submits again, and the deterministic id makes it a no-op
    [again] = Watcher(backend, settle_s=0).poll()
    assert (again.run_id, again.created) == (first.run_id, False)
    assert runs(backend) == [first.run_id]
    row = WorkflowClient(backend).row(first.run_id)
    assert row.extra["trigger"] == "inbox" and row.extra["trigger_path"] == str(data)
    state = WorkflowClient(backend).state(first.run_id)
    assert state.definition.params["path"] == str(data)
    # a new version of the same file starts a second run
    data.write_text("1,2,3\n4,5,6\n")
    [second] = watcher.poll()
    assert second.created and second.run_id != first.run_id
    assert runs(backend) == sorted([first.run_id, second.run_id])


def test_unsettled_files_wait(backend: SqliteBackend, tmp_path: Path) -> None:
    now = [1_000_000.0]
    TriggerStore(backend).add(make_trigger(f"{tmp_path}/in/"))
    (tmp_path / "in").mkdir()
    f = tmp_path / "in" / "big.bin"
    f.write_bytes(b"x")
    os.utime(f, (now[0] - 0.5, now[0] - 0.5))
    watcher = Watcher(backend, settle_s=2.0, clock=lambda: now[0])
    assert watcher.poll() == []
    now[0] += 5
    assert [x.created for x in watcher.poll()] == [True]


def test_prefix_that_is_not_a_directory(backend: SqliteBackend, tmp_path: Path) -> None:
    TriggerStore(backend).add(make_trigger(f"{tmp_path}/scan-"))
    for name in ("scan-1.txt", "scan-2.txt", "other.txt"):
        (tmp_path / name).write_text(name)
    fired = Watcher(backend, settle_s=0).poll()
    assert sorted(Path(f.path).name for f in fired) == ["scan-1.txt", "scan-2.txt"]

"""SQLite backend shared by several processes: no lost update, no double delivery."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from pathlib import Path

from dagq.backends.sqlite import SqliteBackend
from dagq.errors import PreconditionFailed

PROCESSES = 4


def _bump_counter(db: str, times: int, start: Barrier) -> None:
    backend = SqliteBackend(db)
    start.wait(30)
    for _ in range(times):
        while True:
            data, etag = backend.states.read("counter")
            try:
                backend.states.replace("counter", str(int(data) + 1).encode(), etag)
                break
            except PreconditionFailed:
                continue
    backend.close()


def _consume(db: str, out: str, start: Barrier) -> None:
    backend = SqliteBackend(db)
    queue = backend.queues.get("work")
    received: list[str] = []
    start.wait(30)
    idle = 0
    while idle < 3:
        got = queue.receive(5, 60.0, wait_s=0.2)
        idle = 0 if got else idle + 1
        received += [m.body.decode() for m in got]
        queue.delete_many(got[::2])  # leave some undeleted: they stay hidden for 60 s
    Path(out).write_text(json.dumps(received))
    backend.close()


def _run(target: Callable[..., None], args: list[tuple[object, ...]]) -> None:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(len(args))  # all start together, once every one has imported
    procs = [ctx.Process(target=target, args=(*a, start)) for a in args]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0, f"worker process exited with {p.exitcode}"


def test_processes_incrementing_one_state_by_cas_lose_no_update(tmp_path: Path) -> None:
    db = str(tmp_path / "store.db")
    backend = SqliteBackend(db)
    backend.states.create("counter", b"0")
    _run(_bump_counter, [(db, 50)] * PROCESSES)
    assert backend.states.read("counter") == (
        str(50 * PROCESSES).encode(), str(50 * PROCESSES + 1))


def test_processes_receiving_from_one_queue_never_share_a_message(tmp_path: Path) -> None:
    db = str(tmp_path / "store.db")
    backend = SqliteBackend(db)
    total = 400
    backend.queues.get("work").send_many((str(i).encode(), 0.0, None) for i in range(total))
    outs = [str(tmp_path / f"out{i}.json") for i in range(PROCESSES)]
    _run(_consume, [(db, out) for out in outs])
    received = [m for out in outs for m in json.loads(Path(out).read_text())]
    assert sorted(received, key=int) == [str(i) for i in range(total)]


def test_opening_waits_for_another_process_first_write_on_a_new_file(tmp_path: Path) -> None:
    """A new file is in rollback mode until someone switches it to WAL; while another
    process holds its first write transaction, SQLite refuses that switch at once (no busy
    wait). Opening the store must wait for it, not fail: a coordinator and a worker
    started together on a new store once exited with "database is locked"."""
    path = tmp_path / "new.db"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
        "c.execute('CREATE TABLE t (x)'); c.execute('BEGIN IMMEDIATE')\n"
        "c.execute('INSERT INTO t VALUES (1)'); print('locked', flush=True)\n"
        "time.sleep(0.5); c.execute('COMMIT')\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        backend = SqliteBackend(path)  # waited for the holder's commit, then migrated
        assert backend.index.query() == []
    finally:
        assert holder.wait(timeout=30) == 0

"""The embedded queues' doorbell: a waiting receiver wakes when a message is sent, across
processes, instead of at its next poll; without a usable bell it polls as before.

Every receiver here polls only every 30 s, so a receive that returns within the test's
patience was woken by the bell, not by its poll."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from dagq.backends.sqlite import SqliteBackend
from dagq.backends.sqlite.bell import Bell, bells_dir
from dagq.ports import Message

SLOW_POLL = 30.0
PATIENCE = 15.0


def receive_in_thread(db: Path, out: list[list[Message]], max_messages: int = 1,
                      wait_s: float = 60.0) -> threading.Thread:
    """A receiver on its own backend, waiting for ``work``; what it got goes to ``out``."""
    backend = SqliteBackend(str(db), poll_interval_s=SLOW_POLL)
    queue = backend.queues.get("work")
    queue.receive(1, 60.0)  # the first look, and the bell opened, before anything is sent

    def run() -> None:
        try:
            out.append(queue.receive(max_messages, 60.0, wait_s=wait_s))
        finally:
            backend.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_send_from_another_process_wakes_a_waiting_receiver(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    got: list[list[Message]] = []
    waiter = receive_in_thread(db, got)
    time.sleep(0.3)  # the receiver is waiting in its poll
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", (
        "import sys; from dagq.backends.sqlite import SqliteBackend; "
        "b = SqliteBackend(sys.argv[1]); b.queues.get('work').send(b'hello'); b.close()"),
        str(db)], check=True)
    waiter.join(PATIENCE)
    assert not waiter.is_alive(), "the receiver slept through the send (no bell)"
    assert [m.body for m in got[0]] == [b"hello"]
    assert time.monotonic() - started < PATIENCE


def test_two_waiters_both_wake_for_two_messages_sent_at_once(tmp_path: Path) -> None:
    """One ring for a batch: the receiver that takes all it asked for rings again, so a
    second waiter whose wake-up the first may have read still looks."""
    db = tmp_path / "store.db"
    got: list[list[Message]] = []
    waiters = [receive_in_thread(db, got) for _ in range(2)]
    time.sleep(0.3)
    sender = SqliteBackend(str(db))
    sender.queues.get("work").send_many([(b"a", 0.0, None), (b"b", 0.0, None)])
    deadline = time.monotonic() + PATIENCE  # one patience for both, shorter than a poll
    for w in waiters:
        w.join(max(0.0, deadline - time.monotonic()))
    assert not any(w.is_alive() for w in waiters), "a waiter slept through the batch"
    assert sorted(m.body for batch in got for m in batch) == [b"a", b"b"]
    sender.close()


def test_a_delayed_send_does_not_ring(tmp_path: Path) -> None:
    bell = Bell(bells_dir(tmp_path / "store.db"), "work")
    listener = Bell(bells_dir(tmp_path / "store.db"), "work")
    listener.wait(0)  # opened and drained
    backend = SqliteBackend(str(tmp_path / "store.db"))
    backend.queues.get("work").send(b"later", delay_s=60)
    started = time.monotonic()
    listener.wait(0.3)
    assert time.monotonic() - started >= 0.25, "a message not yet visible woke the waiter"
    bell.ring()
    started = time.monotonic()
    listener.wait(SLOW_POLL)
    assert time.monotonic() - started < PATIENCE
    for b in (bell, listener):
        b.close()
    backend.close()


def test_without_a_usable_bell_the_queue_still_delivers_by_polling(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    bells_dir(db).write_text("not a folder")  # the bells cannot be made
    backend = SqliteBackend(str(db), poll_interval_s=0.01)
    queue = backend.queues.get("work")
    threading.Timer(0.2, lambda: SqliteBackend(str(db)).queues.get("work").send(b"x")).start()
    got = queue.receive(1, 60.0, wait_s=PATIENCE)
    assert [m.body for m in got] == [b"x"]
    backend.close()


def test_a_closed_backend_leaves_no_descriptor_open(tmp_path: Path) -> None:
    fds = Path("/proc/self/fd")
    before = len(list(fds.iterdir()))
    for _ in range(20):
        backend = SqliteBackend(str(tmp_path / "store.db"))
        queue = backend.queues.get("work")
        queue.send(b"x")
        queue.receive(1, 60.0, wait_s=0.01)
        backend.close()
    assert len(list(fds.iterdir())) <= before + 2


def test_a_bell_above_descriptor_1024_still_wakes(tmp_path: Path) -> None:
    """A busy worker may hold more than 1,024 descriptors; ``select`` cannot watch one
    above that (ValueError), which must neither break a wait nor turn it into a poll."""
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        listener = Bell(bells_dir(tmp_path / "store.db"), "work")
        fd = listener.open()
        assert fd is not None and fd > 1024
        Bell(bells_dir(tmp_path / "store.db"), "work").ring()
        started = time.monotonic()
        listener.wait(SLOW_POLL)
        assert time.monotonic() - started < PATIENCE
        listener.close()
    finally:
        for f in filler:
            os.close(f)

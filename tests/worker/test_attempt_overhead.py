"""The worker's pacer runs due callbacks on one thread, and a short attempt starts no
thread of its own: its log capture and "still running" record are callbacks it cancels;
its working directory is removed without walking the tree when it holds what it should."""

from __future__ import annotations

import os
import stat
import tempfile
import threading
import time
from pathlib import Path

import pytest

from dagq.backends import open_backend
from dagq.worker.logcapture import POLL_S, LogCapture
from dagq.worker.pacer import Pacer
from dagq.worker.workdirs import new_workdir
from tests.e2e.harness import eventually


def test_callbacks_run_in_due_order_and_cancelled_ones_never() -> None:
    pacer = Pacer()
    ran: list[str] = []
    done = threading.Event()
    pacer.call_later(0.2, lambda: (ran.append("late"), done.set()))
    dropped = pacer.call_later(0.05, lambda: ran.append("cancelled"))
    pacer.call_later(0.1, lambda: ran.append("early"))
    pacer.cancel(dropped)
    assert done.wait(5)
    assert ran == ["early", "late"]
    assert pacer.pending() == 0


def test_a_failing_callback_does_not_stop_the_next() -> None:
    pacer = Pacer()
    done = threading.Event()

    def boom() -> None:
        raise RuntimeError("injected")

    pacer.call_later(0.0, boom)
    pacer.call_later(0.01, done.set)
    assert done.wait(5)


def test_many_cancelled_callbacks_do_not_pile_up() -> None:
    pacer = Pacer()
    for _ in range(10_000):
        pacer.cancel(pacer.call_later(3600.0, lambda: None))
    assert pacer.pending() == 0
    assert len(pacer._due) < 100  # dead entries are dropped, not kept until due


def test_cancelled_callbacks_do_not_wake_the_pacer() -> None:
    """An attempt cancels its two timers when it ends; at hundreds of attempts a second,
    waking for each would take the interpreter lock from the slots that many times."""
    pacer = Pacer()
    waits = 0
    real_wait = pacer._cond.wait

    def counted(timeout: float | None = None) -> bool:
        nonlocal waits
        waits += 1
        return real_wait(timeout)

    pacer._cond.wait = counted  # type: ignore[method-assign]
    done = threading.Event()
    pacer.call_later(0.0, lambda: None)  # starts the thread
    for k in range(50):
        pacer.cancel(pacer.call_later(0.01 + k * 0.002, lambda: None))
    pacer.call_later(0.3, done.set)
    assert done.wait(5)
    assert waits <= 5


def _capture(tmp_path: Path) -> LogCapture:
    outputs = open_backend(f"sqlite:{tmp_path / 'x.db'}").outputs
    return LogCapture(outputs, tmp_path / "a.log", "wf", "t", 1, 1000, max_bytes=1 << 20,
                      flush_interval=0.1)


def test_a_capture_that_ends_before_its_first_poll_starts_no_thread(tmp_path: Path) -> None:
    before = threading.active_count()
    capture = _capture(tmp_path).start(Pacer())
    (tmp_path / "a.log").write_bytes(b"hello\n")
    stats = capture.finish()
    assert capture._thread is None
    assert stats.printed == 6 and stats.stored == 6
    assert threading.active_count() <= before + 1  # at most the pacer's own thread


def test_a_long_capture_starts_its_thread_and_streams(tmp_path: Path) -> None:
    capture = _capture(tmp_path).start(Pacer())
    with open(tmp_path / "a.log", "ab") as f:
        f.write(b"x" * 100)
    eventually(lambda: capture.uploads >= 1 or None, "the first chunk upload", 10.0)
    assert capture._thread is not None
    time.sleep(POLL_S)
    assert capture.finish().stored == 100


def test_a_workdir_goes_whatever_the_task_left_in_it(tmp_path: Path) -> None:
    from dagq.worker.environment import INPUTS_FILE, OUTPUT_FILE
    from dagq.worker.workdirs import remove_workdir

    plain, messy, odd = tmp_path / "plain", tmp_path / "messy", tmp_path / "odd"
    for d in (plain, messy, odd):
        d.mkdir()
        (d / INPUTS_FILE).write_text("{}")
    (plain / OUTPUT_FILE).write_text("1")
    (messy / "sub").mkdir()
    (messy / "sub" / "f").write_text("x")
    (odd / OUTPUT_FILE).mkdir()  # a directory where the output file would be
    for d in (plain, messy, odd):
        remove_workdir(d)
        assert not d.exists()


def test_a_workdir_is_removed_off_the_slots_path_and_none_outlives_the_worker(
        tmp_path: Path) -> None:
    from dagq.worker.environment import INPUTS_FILE
    from dagq.worker.workdirs import discard_workdir, remove_pending_workdirs

    plain, messy, late = tmp_path / "plain", tmp_path / "messy", tmp_path / "late"
    for d in (plain, messy, late):
        d.mkdir()
        (d / INPUTS_FILE).write_text("{}")
    (messy / "sub").mkdir()
    (messy / "sub" / "f").write_text("x")
    pacer = Pacer()
    discard_workdir(plain, pacer)
    discard_workdir(messy, pacer)
    eventually(lambda: (not plain.exists() and not messy.exists()) or None,
               "the pacer removing both", 10.0)
    held = Pacer()
    gate = threading.Event()
    held.call_later(0.0, gate.wait)  # the pacer is busy: removals wait
    discard_workdir(late, held)
    assert late.exists()
    remove_pending_workdirs()  # what a stopping worker does
    assert not late.exists()
    gate.set()


def test_a_new_workdir_is_private_and_never_an_existing_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Workdirs are named by pid and a counter (cheaper than a random name); a name that
    is taken, by a directory or by a planted link, gets a random one instead."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    first = new_workdir()
    assert first.parent == tmp_path and first.name.startswith(f"dagq-task-{os.getpid()}-")
    assert stat.S_IMODE(first.stat().st_mode) == 0o700
    n = int(first.name.rsplit("-", 1)[1])
    planted = tmp_path / "elsewhere"
    planted.mkdir()
    (tmp_path / f"dagq-task-{os.getpid()}-{n + 1}").symlink_to(planted)
    (tmp_path / f"dagq-task-{os.getpid()}-{n + 2}").mkdir()
    taken = [new_workdir(), new_workdir()]
    for path in taken:
        assert path.is_dir() and not path.is_symlink() and path != first
        assert not path.name.startswith(f"dagq-task-{os.getpid()}-"), "a random name"
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert new_workdir().name == f"dagq-task-{os.getpid()}-{n + 3}"
    assert not list(planted.iterdir())

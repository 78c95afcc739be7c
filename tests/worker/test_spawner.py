"""The spawn server: one compiled supervisor per worker process starts every task, with
the guarantees of a supervisor per task (``tests/worker/test_parentdeath.py`` runs its
kill -9 tests through it too). These tests cover what only the server has: many threads
sharing it, outliving the thread that started it, being killed on its own, and a
request it cannot read."""

from __future__ import annotations

import os
import signal
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dagq.worker import parentdeath, spawner
from dagq.worker.process import run_process
from tests.e2e.harness import eventually
from tests.worker.test_parentdeath import _kill, _sleepers, build_supervisor

pytestmark = pytest.mark.skipif(not parentdeath.available(),
                                reason="needs Linux with /proc (the task supervisor)")


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_supervisor(tmp_path_factory.mktemp("spawner") / parentdeath.BINARY)


@pytest.fixture(autouse=True)
def compiled(binary: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tasks start through a fresh server of the supervisor built from this source."""
    monkeypatch.setenv(parentdeath.SUPERVISOR_ENV, str(binary))
    monkeypatch.delenv(parentdeath.SERVER_ENV, raising=False)
    parentdeath.command.cache_clear()
    spawner.shutdown()
    yield
    spawner.shutdown()
    parentdeath.command.cache_clear()


@pytest.fixture
def marker() -> Iterator[str]:
    m = f"30.{uuid.uuid4().int % 10**9:09d}"
    yield m
    _kill(m)


def _run(tmp_path: Path, cmd: str, log: str = "log") -> tuple[int, str]:
    result = run_process(["/bin/sh", "-c", cmd], env=dict(os.environ), cwd=None,
                         log_path=tmp_path / log, stop=threading.Event(), timeout_s=None,
                         kill_timeout=5.0)
    return result.returncode, result.tail


def _parent_of_task(tmp_path: Path) -> int:
    code, tail = _run(tmp_path, 'set -- $(cut -d")" -f2 /proc/$$/stat); echo "ppid=$2"')
    assert code == 0, tail
    return int(tail.rpartition("ppid=")[2])


def _server_pid(binary: Path) -> int:
    srv = spawner.server(str(binary))
    assert srv is not None
    return srv.pid


def test_every_task_of_a_worker_is_a_child_of_its_one_server(tmp_path: Path,
                                                            binary: Path) -> None:
    first, second = _parent_of_task(tmp_path), _parent_of_task(tmp_path)
    assert first == second == _server_pid(binary)
    assert Path(f"/proc/{first}/exe").resolve() == binary.resolve()


def test_with_the_server_turned_off_each_task_gets_a_supervisor(
        tmp_path: Path, binary: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(parentdeath.SERVER_ENV, "0")
    first, second = _parent_of_task(tmp_path), _parent_of_task(tmp_path)
    assert first != second  # a supervisor each, both gone by now
    assert not spawner._servers


def test_tasks_of_many_threads_each_get_their_own_return_code(tmp_path: Path) -> None:
    results: dict[tuple[int, int], int] = {}

    def slot(n: int) -> None:
        for k in range(5):
            code, _ = _run(tmp_path, f"exit {n * 10 + k}", log=f"log{n}")
            results[n, k] = code

    threads = [threading.Thread(target=slot, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results == {(n, k): n * 10 + k for n in range(8) for k in range(5)}
    assert len(spawner._servers) == 1


def test_the_server_outlives_the_thread_that_started_it(tmp_path: Path, binary: Path) -> None:
    """Its parent-death signal comes when that thread ends; the server looks at its
    parent and keeps serving."""
    started = threading.Thread(target=_run, args=(tmp_path, "true"))
    started.start()
    started.join()
    pid = _server_pid(binary)
    time.sleep(0.3)
    assert _run(tmp_path, "exit 4")[0] == 4
    assert _server_pid(binary) == pid


def test_a_thread_that_ends_takes_its_connection_with_it(tmp_path: Path, binary: Path) -> None:
    """Each thread asks over a connection of its own; the server closes it when the
    thread has gone, so threads that come and go leave no descriptors behind."""
    _run(tmp_path, "true")
    descriptors = Path(f"/proc/{_server_pid(binary)}/fd")
    before = len(list(descriptors.iterdir()))
    for n in range(5):
        thread = threading.Thread(target=_run, args=(tmp_path, f"exit {n}"))
        thread.start()
        thread.join()
    eventually(lambda: len(list(descriptors.iterdir())) == before or None,
               "the server to close the connections of the threads that ended", 10)


def test_a_killed_server_fails_its_running_task_and_takes_its_tree(
        tmp_path: Path, binary: Path, marker: str) -> None:
    outcome: list[tuple[int, str]] = []
    task = threading.Thread(target=lambda: outcome.append(
        _run(tmp_path, f"sleep {marker} & sleep {marker}; wait")))
    task.start()
    eventually(lambda: len(_sleepers(marker)) == 2 or None, "the task", 20)
    killed = _server_pid(binary)
    os.kill(killed, signal.SIGKILL)
    task.join(timeout=30)
    code, tail = outcome[0]
    assert code == -signal.SIGKILL
    assert f"the task supervisor (pid {killed}) ended" in tail
    eventually(lambda: not _sleepers(marker), "the task's processes to die", 10)
    assert _run(tmp_path, "exit 5")[0] == 5  # the next task starts a new server
    assert _server_pid(binary) != killed


def test_what_a_finished_task_left_behind_ends_with_the_server(tmp_path: Path,
                                                               marker: str) -> None:
    """A leftover background process is re-parented to the server (a subreaper), so it
    stays reachable: the server's end (the worker's) takes it."""
    assert _run(tmp_path, f"sleep {marker} >/dev/null 2>&1 &")[0] == 0
    eventually(lambda: _sleepers(marker) or None, "the leftover", 20)
    spawner.shutdown()
    eventually(lambda: not _sleepers(marker), "the leftover to die", 10)


def test_a_request_it_cannot_read_stops_the_server_with_a_message(binary: Path,
                                                                 tmp_path: Path) -> None:
    mine, theirs = socket.socketpair()
    errors = tmp_path / "stderr"
    with mine, theirs, open(errors, "wb") as err:
        assert theirs.fileno() != spawner.SERVER_FD
        pid = os.posix_spawn(str(binary), [str(binary), "--serve", str(os.getpid())],
                             dict(os.environ), file_actions=[
                                 (os.POSIX_SPAWN_DUP2, theirs.fileno(), spawner.SERVER_FD),
                                 (os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
        mine.sendall(struct.pack("<5I", 0xBAD, 1, 1, 0, 2) + b"\0x")
        status = os.waitpid(pid, 0)[1]
    assert os.waitstatus_to_exitcode(status) == 125
    assert "malformed request" in errors.read_text()


def test_a_null_byte_is_refused_as_popen_refuses_it(tmp_path: Path, binary: Path) -> None:
    """It would break the request's framing; the server is not disturbed by it."""
    with pytest.raises(ValueError, match="null byte"):
        _run(tmp_path, "echo a\0b")
    pid = _server_pid(binary)
    assert _run(tmp_path, "exit 6")[0] == 6
    assert _server_pid(binary) == pid

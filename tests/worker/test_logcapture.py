"""Log capture in-process on the embedded store: chunks and offsets, the head+tail cap,
disk blocks freed while a task prints, and store failures retried without loss."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dagq.backends import open_backend
from dagq.ports import Backend, OutputStore
from dagq.protocol.attempts import first_line
from dagq.protocol.tasklogs import last_lines, log_object_name, log_parts, read_log
from dagq.worker.logcapture import CHUNK_BYTES, KEEP_LOCAL, LogCapture
from tests.e2e.harness import eventually
from tests.worker.test_dirsync import FlakyOutputs


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[Backend]:
    b = open_backend(f"sqlite:{tmp_path / 'x.db'}")
    yield b
    b.close()


def _capture(outputs: OutputStore, path: Path, max_bytes: int = 1 << 20,
             flush_interval: float = 0.1) -> LogCapture:
    return LogCapture(outputs, path, "wf", "t", 1, 1000, max_bytes=max_bytes,
                      flush_interval=flush_interval)


def test_lines_are_stored_while_printing_and_read_back_by_offset(
        backend: Backend, tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    cap = _capture(backend.outputs, path).start()
    with open(path, "ab") as f:
        f.write(b"first\n")
        f.flush()
        eventually(lambda: read_log(backend.outputs, "wf", "t", 1)[0] or None, "a chunk", 10)
        f.write(b"second\n")
    stats = cap.finish()
    assert not path.exists()
    assert (stats.printed, stats.stored, stats.truncated) == (13, 13, False)
    assert read_log(backend.outputs, "wf", "t", 1) == (b"first\nsecond\n", 13)
    assert read_log(backend.outputs, "wf", "t", 1, offset=6) == (b"second\n", 13)
    assert read_log(backend.outputs, "wf", "t", 1, offset=3, limit=5) == (b"st\nse", 8)
    assert read_log(backend.outputs, "wf", "t", 1, offset=13) == (b"", 13)
    assert [p.name for p in log_parts(backend.outputs, "wf", "t", 1)] == [
        log_object_name("wf", "t", 1, 1000, 0), log_object_name("wf", "t", 1, 1000, 1)]


def test_runs_of_one_attempt_read_in_start_order_and_other_tasks_are_left_out(
        backend: Backend) -> None:
    out = backend.outputs
    out.put(log_object_name("wf", "t", 1, 2000, 0), b"second run\n")
    out.put(log_object_name("wf", "t", 1, 1000, 0), b"first run\n")
    out.put(log_object_name("wf", "t", 1, 1000, None), b"first tail\n")
    out.put(log_object_name("wf", "t/1", 2, 1000, 0), b"another task\n")  # shares the prefix
    assert read_log(out, "wf", "t", 1)[0] == b"first run\nfirst tail\nsecond run\n"
    out.put(log_object_name("wf", "t", 1, 2000, None), b"second tail, still changing\n")
    # a follower leaves out the running run's tail only
    assert read_log(out, "wf", "t", 1, open_tail=False)[0] == (
        b"first run\nfirst tail\nsecond run\n")
    assert read_log(out, "wf", "t", 1)[0].endswith(b"second run\nsecond tail, still changing\n")
    assert read_log(out, "wf", "t/1", 2)[0] == b"another task\n"


def test_a_capped_log_keeps_head_and_tail_with_a_marker(backend: Backend, tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    cap = _capture(backend.outputs, path, max_bytes=4000).start()
    lines = [b"%06d\n" % i for i in range(10_000)]  # 70 000 bytes
    with open(path, "ab") as f:
        f.writelines(lines)
    stats = cap.finish()
    data, _ = read_log(backend.outputs, "wf", "t", 1)
    head = data[:2000]
    marker, tail = data[2000:].split(b"]\n", 1)
    assert head == b"".join(lines)[:2000]
    assert marker == (b"\n[dagq: 66000 bytes left out here; an attempt's stored log keeps its "
                      b"first 2000 and last 2000 bytes (DAGQ_LOG_MAX_BYTES=4000)")
    assert tail == b"".join(lines)[-2000:]
    assert stats.truncated and stats.printed == 70_000 and stats.stored == len(data)


def test_disk_blocks_are_freed_while_the_task_still_prints(
        backend: Backend, tmp_path: Path) -> None:
    path = tmp_path / "flood.log"
    cap = _capture(backend.outputs, path, max_bytes=2 * CHUNK_BYTES).start()
    total = 40 * CHUNK_BYTES
    with open(path, "ab") as f:
        for _ in range(40):
            f.write(b"y" * CHUNK_BYTES)
        f.flush()

        def freed() -> int | None:
            used = path.stat().st_blocks * 512
            return used if used < 4 * CHUNK_BYTES else None

        used = eventually(freed, "the capture to free the blocks it has read", 20)
        assert path.stat().st_size == total  # the writer's offset is untouched
        assert used >= KEEP_LOCAL  # the end stays readable for the error tail
        f.write(b"END\n")
    stats = cap.finish()
    assert stats.printed == total + 4
    assert read_log(backend.outputs, "wf", "t", 1)[0].endswith(b"y" * 100 + b"END\n")


def test_a_store_outage_delays_the_log_but_loses_nothing(
        backend: Backend, tmp_path: Path) -> None:
    path = tmp_path / "flaky.log"
    flaky = FlakyOutputs(backend.outputs, fail=3)
    cap = _capture(flaky, path).start()  # type: ignore[arg-type]
    with open(path, "ab") as f:
        f.write(b"one\n")
        f.flush()
        eventually(lambda: flaky.fail == 0 or None, "the failing puts", 10)
        time.sleep(0.3)
        f.write(b"two\n")
    cap.finish()
    assert read_log(backend.outputs, "wf", "t", 1)[0] == b"one\ntwo\n"


@pytest.mark.parametrize(("error", "line"), [
    (None, None),
    ("cancelled: the workflow was cancelled", "cancelled: the workflow was cancelled"),
    ("command exited with code 1\nloading\nRuntimeError: CUDA out of memory\n",
     "RuntimeError: CUDA out of memory"),
    # a plain output line is never the summary (issue 31, point 3)
    ("command exited with code 2\nusage: train.py [-h]\nplain last line",
     "command exited with code 2"),
    ("command exited with code 1", "command exited with code 1"),
    ("command exited with code 1\ncat: in.csv: No such file or directory\ndone",
     "cat: in.csv: No such file or directory"),
    ("command was killed by signal 9\nepoch 3 loss 0.21", "command was killed by signal 9"),
    ("function m:f was killed by signal 9\nMemoryError: out of memory\n",
     "MemoryError: out of memory"),
])
def test_the_meaningful_line_of_an_error(error: str | None, line: str | None) -> None:
    assert first_line(error) == line


def test_last_lines() -> None:
    assert last_lines(b"a\nb\nc\n", 2) == b"b\nc\n"
    assert last_lines(b"a\nb", 5) == b"a\nb"
    assert last_lines(b"a\n", 0) == b""

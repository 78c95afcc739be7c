"""DirSync and the synced-directory helpers on a real embedded store (uploads counted)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dagq.backends.sqlite import SqliteBackend
from dagq.config import Settings
from dagq.errors import ConfigError, StoreUnavailable, TaskError
from dagq.ports import OutputStore
from dagq.protocol.synced import download_synced, list_synced
from dagq.worker.dirsync import DirSync, dir_prefix, parse_spec

PREFIX = dir_prefix("wf-1", "train")


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[SqliteBackend]:
    b = SqliteBackend(str(tmp_path / "x.db"))
    yield b
    b.close()


def puts(b: SqliteBackend) -> int:
    return b.stats.counts["output.put"]


def age(path: Path, seconds: float = 10.0) -> None:
    """Move the mtime back, out of the window in which a file is hashed on every round."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - int(seconds * 1e9)))


def test_only_new_and_changed_files_are_uploaded(tmp_path: Path, backend: SqliteBackend) -> None:
    local = tmp_path / "ckpt"
    (local / "sub").mkdir(parents=True)
    for name, text in [("a.txt", "A"), ("b.txt", "B"), ("sub/c.txt", "C")]:
        (local / name).write_text(text)
        age(local / name)
    sync = DirSync(backend.outputs, local, PREFIX, every_s=60)
    assert sync.sync_once() == 3 and puts(backend) == 3
    assert sync.sync_once() == 0 and puts(backend) == 3

    (local / "a.txt").write_text("A")  # same bytes, new mtime: the MD5 says unchanged
    assert sync.sync_once() == 0
    (local / "b.txt").write_text("B2")
    (local / "d.txt").write_text("D")
    assert sync.sync_once() == 2 and puts(backend) == 5
    assert sync.uploads == 5

    assert {p: (n, m) for p, n, m in list_synced(backend.outputs, "wf-1", "train")} == {
        "a.txt": (1, "7fc56270e7a70fa81a5935b72eacbe29"),
        "b.txt": (2, "bbd97b00c539801e32317ab550867ec4"),
        "d.txt": (1, "f623e75af30e62bbd73d6df5b50bb7b5"),
        "sub/c.txt": (1, "0d61f8370cad1d412f80b84d143e1257"),
    }


def test_a_later_attempt_does_not_resend_what_the_store_already_has(
        tmp_path: Path, backend: SqliteBackend) -> None:
    local = tmp_path / "ckpt"
    local.mkdir()
    (local / "a.txt").write_text("A")
    DirSync(backend.outputs, local, PREFIX, every_s=60).stop()
    assert puts(backend) == 1
    again = DirSync(backend.outputs, local, PREFIX, every_s=60)
    again.stop()
    assert puts(backend) == 1 and again.uploads == 0 and again.unchanged == 1


def test_the_background_thread_syncs_while_running_and_stop_syncs_once_more(
        tmp_path: Path, backend: SqliteBackend) -> None:
    local = tmp_path / "ckpt"
    local.mkdir()
    (local / "early.txt").write_text("1")
    sync = DirSync(backend.outputs, local, PREFIX, every_s=0.05)
    sync.start()

    deadline = time.monotonic() + 30
    while not backend.outputs.list(PREFIX) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [n for n, _, _ in backend.outputs.list(PREFIX)] == [PREFIX + "early.txt"]
    (local / "late.txt").write_text("2")
    sync.stop()
    assert sorted(p for p, _, _ in list_synced(backend.outputs, "wf-1", "train")) == [
        "early.txt", "late.txt"]


class FlakyOutputs:
    """Output storage whose first ``fail`` puts fail as if the store were unreachable."""

    def __init__(self, inner: OutputStore, fail: int) -> None:
        self.inner, self.fail = inner, fail

    def put(self, name: str, data: bytes) -> str:
        if self.fail:
            self.fail -= 1
            raise StoreUnavailable("injected: the store cannot be reached")
        return self.inner.put(name, data)

    def get(self, name: str) -> bytes:
        return self.inner.get(name)

    def list(self, prefix: str) -> list[tuple[str, int, str]]:
        return self.inner.list(prefix)


def test_store_errors_are_logged_and_retried_never_raised(
        tmp_path: Path, backend: SqliteBackend, caplog: pytest.LogCaptureFixture) -> None:
    local = tmp_path / "ckpt"
    local.mkdir()
    (local / "a.txt").write_text("A")
    sync = DirSync(FlakyOutputs(backend.outputs, fail=1), local, PREFIX, every_s=60)
    assert sync.sync_once() == 0 and sync.errors == 1
    assert "cannot be reached" in caplog.text and "retried next round" in caplog.text
    assert sync.sync_once() == 1
    assert [p for p, _, _ in list_synced(backend.outputs, "wf-1", "train")] == ["a.txt"]


def test_download_writes_the_tree_and_checks_md5(tmp_path: Path, backend: SqliteBackend) -> None:
    backend.outputs.put(PREFIX + "a.txt", b"A")
    backend.outputs.put(PREFIX + "deep/er/b.bin", b"\x00\x01")
    backend.outputs.put(dir_prefix("wf-1", "trainer") + "x", b"not ours")
    got = download_synced(backend.outputs, "wf-1", "train", tmp_path / "out")
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in got) == [
        "a.txt", "deep/er/b.bin"]
    assert (tmp_path / "out" / "deep/er/b.bin").read_bytes() == b"\x00\x01"


class CorruptingOutputs(FlakyOutputs):
    """Output storage that flips the first byte of everything it returns."""

    def get(self, name: str) -> bytes:
        data = self.inner.get(name)
        return bytes([data[0] ^ 1]) + data[1:]


def test_download_refuses_corrupt_and_escaping_files(tmp_path: Path,
                                                     backend: SqliteBackend) -> None:
    backend.outputs.put(PREFIX + "a.txt", b"A")
    with pytest.raises(TaskError, match=r"a\.txt is corrupt: MD5"):
        download_synced(CorruptingOutputs(backend.outputs, 0), "wf-1", "train", tmp_path / "o")
    backend.outputs.put(dir_prefix("wf-2", "t") + "../../escape", b"x")
    with pytest.raises(TaskError, match="would land outside"):
        download_synced(backend.outputs, "wf-2", "t", tmp_path / "o2")
    assert not (tmp_path / "escape").exists()


def test_spec_forms_and_paths(tmp_path: Path) -> None:
    spec = parse_spec("out", task="train", cwd=str(tmp_path), default_every=5)
    assert (spec.path, spec.every_s, spec.name) == (tmp_path / "out", 5.0, "train")
    spec = parse_spec({"path": "/abs/ckpt", "every_s": 0.5, "dest": "ckpt/v1"}, task="train",
                      cwd=str(tmp_path), default_every=5)
    assert (spec.path, spec.every_s, spec.name) == (Path("/abs/ckpt"), 0.5, "ckpt/v1")
    assert parse_spec("o", task="t", cwd=None, default_every=5).path == Path.cwd() / "o"


@pytest.mark.parametrize(("value", "message"), [
    (3, "must be a directory path or a mapping"),
    ({"path": "o", "every": 1}, "unknown key(s) every"),
    ({"every_s": 1}, "path must be a non-empty directory path"),
    ({"path": "o", "every_s": 0}, "every_s must be a number of seconds above 0"),
    ({"path": "o", "every_s": True}, "every_s must be a number"),
    ({"path": "o", "dest": "../x"}, "dest must be a relative name"),
    ({"path": "o", "dest": "/x"}, "dest must be a relative name"),
])
def test_bad_specs_name_the_problem(value: object, message: str) -> None:
    with pytest.raises(TaskError, match="bg_dirsync_to") as err:
        parse_spec(value, task="t", cwd=None, default_every=5)
    assert message in str(err.value)


def test_default_interval_from_the_environment() -> None:
    assert Settings.from_env({}).dirsync_interval == 5.0
    assert Settings.from_env({"DAGQ_DIRSYNC_INTERVAL": "0.5"}).dirsync_interval == 0.5
    for bad in ("0", "-1", "soon"):
        with pytest.raises(ConfigError, match=r"DAGQ_DIRSYNC_INTERVAL=.*(must|is not a number)"):
            Settings.from_env({"DAGQ_DIRSYNC_INTERVAL": bad})

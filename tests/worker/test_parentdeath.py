"""A worker's death takes its tasks' whole process trees: background children, double
forks, ``setsid`` children, even one that also dropped its environment (found only as a
descendant of the task's supervisor, a child subreaper). The supervisor is invisible
otherwise: return codes, signals, the environment and stops read as before. Each test
runs under both supervisors, the compiled one (``supervisor.c``, built here into a
temporary folder) and the Python one, chosen by ``$DAGQ_SUPERVISOR``."""

from __future__ import annotations

import contextlib
import logging
import os
import py_compile
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dagq.worker import parentdeath, proctree, supervisor
from dagq.worker.process import run_process
from tests.e2e.harness import eventually
from tests.worker.stack import SCRIPTS, Stack

pytestmark = [pytest.mark.skipif(not parentdeath.available(),
                                 reason="needs Linux with /proc (the task supervisor)"),
              pytest.mark.usefixtures("impl")]

SHAPES = {
    "background_grandchild": ("sleep {m} & wait", 1),
    "double_fork": ("( ( sleep {m} & ) & ); exec sleep {m}", 2),
    "setsid_child": ("setsid sleep {m} & wait", 1),
    "setsid_without_environment": ("( setsid env -i sleep {m} & ); exec sleep {m}", 2),
}
"""Task commands by name, each with how many ``sleep MARKER`` processes it runs."""


def _marker() -> str:
    """A unique ``sleep`` argument (30 s and a bit) naming one test's processes."""
    return f"30.{uuid.uuid4().int % 10**9:09d}"


def _procs(marker: str) -> list[tuple[int, list[bytes]]]:
    """Live processes (pid, argv) whose command line mentions ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")[:-1]
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state != "Z" and any(marker.encode() in a for a in argv):
            found.append((int(entry.name), argv))
    return found


def _sleepers(marker: str) -> list[int]:
    return [pid for pid, argv in _procs(marker) if argv == [b"sleep", marker.encode()]]


def _kill(marker: str) -> None:
    """Clean up whatever a failed test left running."""
    for pid, _ in _procs(marker):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _gone(marker: str) -> bool:
    return not _procs(marker)


def build_supervisor(out: Path) -> Path:
    """``supervisor.c`` compiled to ``out`` as ``scripts/setup`` does (skips without cc)."""
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build dagq-supervisor from supervisor.c")
    subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(out),
                    str(parentdeath.SUPERVISOR_C)], check=True, timeout=120)
    return out


@pytest.fixture(scope="session")
def compiled_supervisor(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``dagq-supervisor``, built for this test session."""
    return build_supervisor(tmp_path_factory.mktemp("supervisor") / parentdeath.BINARY)


@pytest.fixture(params=["c", "python"])
def impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The supervisor tasks run under (``$DAGQ_SUPERVISOR``, seen by the stand-in workers
    too): the compiled one or ``supervisor.py``; its path."""
    if request.param == "c":
        chosen = str(request.getfixturevalue("compiled_supervisor"))
    else:
        chosen = str(parentdeath.SUPERVISOR)
    monkeypatch.setenv(parentdeath.SUPERVISOR_ENV, chosen)
    parentdeath.command.cache_clear()
    yield chosen
    parentdeath.command.cache_clear()


@pytest.fixture
def marker() -> Iterator[str]:
    """A fresh marker; its processes are killed after the test."""
    m = _marker()
    yield m
    _kill(m)


def _doomed(tmp_path: Path, cmd: str) -> subprocess.Popen[bytes]:
    """A stand-in worker (scripts/doomed.py) running ``cmd`` in a slot thread."""
    return subprocess.Popen([sys.executable, str(SCRIPTS / "doomed.py"),
                             str(tmp_path / "log"), cmd], start_new_session=True)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_kill_9_of_the_worker_kills_the_task_tree(tmp_path: Path, marker: str,
                                                  shape: str) -> None:
    template, sleepers = SHAPES[shape]
    worker = _doomed(tmp_path, template.format(m=marker))
    try:
        eventually(lambda: len(_sleepers(marker)) == sleepers, f"the {shape} task", 20)
    finally:
        worker.kill()
        worker.wait()
    eventually(lambda: _gone(marker), f"the {shape} task's processes to die", 5)


def test_kill_9_during_a_stop_kills_what_outlives_the_first_process(
        tmp_path: Path, marker: str) -> None:
    """Stopped, the shell dies at once but its child ignores SIGTERM and has a minute of
    grace: the supervisor waits for it, so a kill -9 of the worker still takes it."""
    worker = _doomed(tmp_path, f"( trap '' TERM; exec sleep {marker} ) & wait")
    try:
        eventually(lambda: _sleepers(marker) or None, "the task")
        worker.send_signal(signal.SIGUSR1)  # stop the task
        eventually(lambda: not [p for p, argv in _procs(marker) if argv[0] == b"/bin/sh"],
                   "the shell to end on SIGTERM", 10)
        assert _sleepers(marker)  # still in its grace
    finally:
        worker.kill()
        worker.wait()
    eventually(lambda: _gone(marker), "the task's processes to die", 5)


@pytest.mark.slow
def test_kill_9_of_a_real_worker_kills_every_task_tree(sqlite_stack: Stack, marker: str,
                                                      impl: str) -> None:
    """``dagq worker`` with four tasks of the four shapes at once, then kill -9."""
    tasks = [{"name": name, "kwargs": {"cmd": cmd.format(m=marker)}}
             for name, (cmd, _) in sorted(SHAPES.items())]
    sqlite_stack.coordinator()
    worker = sqlite_stack.worker("default", "--concurrency", str(len(tasks)),
                                 env={parentdeath.SUPERVISOR_ENV: impl})
    sqlite_stack.submit("trees", tasks)
    want = sum(n for _, n in SHAPES.values())
    eventually(lambda: len(_sleepers(marker)) == want, "every task to start", 60)
    worker.kill()
    eventually(lambda: _gone(marker), "every task process to die", 5)


def _run(tmp_path: Path, argv: list[str], env: dict[str, str] | None = None,
         stop: threading.Event | None = None) -> tuple[int, str, bool]:
    result = run_process(argv, env=dict(os.environ) if env is None else env, cwd=None,
                         log_path=tmp_path / "log", stop=stop or threading.Event(),
                         timeout_s=None, kill_timeout=5.0)
    return result.returncode, result.tail, result.stopped


@pytest.mark.parametrize(("cmd", "code"), [("exit 7", 7), ("true", 0),
                                           ("kill -USR1 $$", -signal.SIGUSR1),
                                           ("kill -9 $$", -signal.SIGKILL)])
def test_the_task_s_return_code_reads_as_before(tmp_path: Path, cmd: str, code: int) -> None:
    assert _run(tmp_path, ["/bin/sh", "-c", cmd])[0] == code


@pytest.mark.parametrize("ctype", [None, "C"])
def test_the_task_gets_exactly_the_environment_given(tmp_path: Path, ctype: str | None) -> None:
    """Also where the interpreter's C locale coercion would add or change LC_CTYPE."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ONLY": "this"}
    if ctype is not None:
        env["LC_CTYPE"] = ctype
    code, tail, _ = _run(tmp_path, [shutil.which("env") or "/usr/bin/env"], env=env)
    assert code == 0, tail
    seen = dict(line.split("=", 1) for line in tail.splitlines())
    token = seen.pop(proctree.TOKEN_ENV)
    assert seen == env and token


@pytest.mark.parametrize("impl", ["python"], indirect=True)
def test_the_compiled_supervisor_is_run_only_while_up_to_date(tmp_path: Path) -> None:
    source = tmp_path / "supervisor.py"
    source.write_bytes(parentdeath.SUPERVISOR.read_bytes())
    assert parentdeath.script(source) == str(source)  # nothing compiled yet
    compiled = py_compile.compile(str(source), doraise=True)
    assert parentdeath.script(source) == compiled
    argv = [sys.executable, "-I", "-S", compiled, str(os.getpid()), "--", "/bin/sh", "-c",
            "exit 7"]
    assert subprocess.run(argv, timeout=30).returncode == 7
    source.write_bytes(source.read_bytes() + b"\n")  # edited since: another size
    assert parentdeath.script(source) == str(source)


def test_the_task_leads_its_own_session_and_group_as_before(tmp_path: Path) -> None:
    """``kill -- -$$`` still reaches the task's group."""
    cmd = 'set -- $(cut -d")" -f2 /proc/$$/stat); [ "$3" = $$ ] && [ "$4" = $$ ]'
    assert _run(tmp_path, ["/bin/sh", "-c", cmd])[0] == 0


def test_a_stop_reads_as_before(tmp_path: Path, marker: str) -> None:
    """The shell's trap runs once; its exit code is the result; the tree is gone."""
    trapped = tmp_path / "trapped"
    stop = threading.Event()

    def stop_once_started() -> None:
        eventually(lambda: _sleepers(marker) or None, "the task")
        stop.set()

    started = threading.Thread(target=stop_once_started)
    started.start()
    cmd = f"trap 'echo t >> {trapped}; exit 3' TERM; sleep {marker} & wait"
    assert _run(tmp_path, ["/bin/sh", "-c", cmd], stop=stop)[::2] == (3, True)
    started.join()
    assert trapped.read_text() == "t\n"
    assert not _procs(marker)


def test_a_missing_program_fails_with_127(tmp_path: Path) -> None:
    code, tail, _ = _run(tmp_path, ["no-such-program-for-dagq"])
    assert code == supervisor.EXIT_CANNOT_RUN
    assert "no-such-program-for-dagq" in tail


def test_a_task_signalling_its_own_group_is_not_a_stop(tmp_path: Path, marker: str) -> None:
    """Only the worker's SIGTERM makes the supervisor wait for the rest of the tree."""
    ready = tmp_path / "ready"
    cmd = (f"( trap '' TERM; touch {ready}; exec sleep {marker} ) & "
           f"until [ -e {ready} ]; do sleep 0.01; done; kill 0; wait")
    code, _, stopped = _run(tmp_path, ["/bin/sh", "-c", cmd])
    assert (code, stopped) == (-signal.SIGTERM, False)
    assert _sleepers(marker)  # left running, as a task's leftovers always were


def test_a_worker_gone_before_the_supervisor_started_runs_nothing(tmp_path: Path) -> None:
    """The supervisor checks its parent after asking for the parent-death signal: a
    parent other than the worker it was started for means that worker is gone."""
    ran = tmp_path / "ran"
    argv = parentdeath.wrap(["/bin/sh", "-c", f"touch {ran}"], os.environ)
    argv[argv.index(str(os.getpid()))] = "1"  # as if re-parented to init
    assert subprocess.run(argv, timeout=30).returncode == supervisor.EXIT_PARENT_GONE
    assert not ran.exists()


@pytest.mark.parametrize("args", [["x", "--", "true"], ["", "--", "true"], ["1"],
                                  ["1", "--"], ["--", "true"], ["1", "--set", "A", "--", "true"],
                                  ["1", "--unset", "--", "true"],
                                  ["1", "--bogus", "A", "--", "true"]])
def test_a_bad_command_line_is_refused(args: list[str]) -> None:
    out = subprocess.run([*parentdeath.command(), *args], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == supervisor.EXIT_USAGE
    assert "usage" in out.stderr


def test_set_and_unset_are_applied() -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GONE": "x", "A": "old"}
    argv = [*parentdeath.command(), str(os.getpid()), "--set", "A=b=c", "--unset", "GONE",
            "--set", "NEW=", "--", shutil.which("env") or "/usr/bin/env"]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    seen = dict(line.split("=", 1) for line in out.stdout.splitlines())
    seen.pop("LC_CTYPE", None)  # the interpreter's locale coercion, not undone here
    assert (out.returncode, seen) == (0, {"PATH": env["PATH"], "A": "b=c", "NEW": ""})


def test_the_chosen_supervisor_is_the_one_run(impl: str) -> None:
    argv = parentdeath.wrap(["true"], {})
    if impl.endswith(".py"):
        script = parentdeath.script(Path(impl))
        assert argv == [sys.executable, "-I", "-S", script, str(os.getpid()),
                        "--unset", "LC_CTYPE", "--", "true"]
    else:  # no locale coercion to undo
        assert argv == [impl, str(os.getpid()), "--", "true"]


@pytest.mark.parametrize("impl", ["python"], indirect=True)
def test_the_compiled_supervisor_is_found_beside_the_interpreter_then_on_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiled_supervisor: Path) -> None:
    bin_dir, path_dir = tmp_path / "venv" / "bin", tmp_path / "path"
    bin_dir.mkdir(parents=True)
    path_dir.mkdir()
    on_path, beside = path_dir / parentdeath.BINARY, bin_dir / parentdeath.BINARY
    python = bin_dir / "python"
    python.symlink_to(sys.executable)
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setenv("PATH", str(path_dir))
    monkeypatch.delenv(parentdeath.SUPERVISOR_ENV)
    assert parentdeath.find_binary() is None
    shutil.copy(compiled_supervisor, on_path)
    assert parentdeath.find_binary() == str(on_path)
    shutil.copy(compiled_supervisor, beside)
    assert parentdeath.find_binary() == str(beside)
    monkeypatch.setenv(parentdeath.SUPERVISOR_ENV, str(on_path))
    assert parentdeath.find_binary() == str(on_path)
    monkeypatch.setenv(parentdeath.SUPERVISOR_ENV, str(parentdeath.SUPERVISOR))
    assert parentdeath.find_binary() is None


@pytest.mark.parametrize("impl", ["python"], indirect=True)
def test_without_the_compiled_supervisor_the_python_one_runs_with_one_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv(parentdeath.SUPERVISOR_ENV)
    monkeypatch.setattr(parentdeath, "find_binary", lambda: None)
    parentdeath.command.cache_clear()
    with caplog.at_level(logging.WARNING, logger=parentdeath.__name__):
        first = parentdeath.wrap(["true"], {})
        assert parentdeath.wrap(["true"], {}) == first
    assert first[:3] == [sys.executable, "-I", "-S"]
    assert first[first.index("--") - 2:first.index("--")] == ["--unset", "LC_CTYPE"]
    assert len(caplog.records) == 1
    assert "20 ms" in caplog.text and "scripts/setup" in caplog.text
    assert _run(tmp_path, ["/bin/sh", "-c", "exit 7"])[0] == 7


@pytest.mark.parametrize("impl", ["c"], indirect=True)
def test_a_compiled_supervisor_older_than_its_source_is_run_with_a_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiled_supervisor: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    stale = tmp_path / parentdeath.BINARY
    shutil.copy(compiled_supervisor, stale)
    os.utime(stale, (0, 0))
    monkeypatch.setenv(parentdeath.SUPERVISOR_ENV, str(stale))
    parentdeath.command.cache_clear()
    with caplog.at_level(logging.WARNING, logger=parentdeath.__name__):
        assert parentdeath.command() == (str(stale),)
    assert "older than its source" in caplog.text


def test_the_task_inherits_no_descriptor_and_no_ignored_signal(tmp_path: Path) -> None:
    """Whichever way the task is started (``posix_spawn`` passes on what is not
    close-on-exec): only stdin, stdout and stderr, and SIGPIPE/SIGXFSZ at their defaults."""
    leaked = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(leaked, True)
    try:
        code, tail, _ = _run(tmp_path, ["/bin/sh", "-c",
                                        "ls /proc/$$/fd; grep SigIgn /proc/$$/status"])
    finally:
        os.close(leaked)
    assert code == 0, tail
    lines = tail.split()
    assert sorted(int(x) for x in lines[:-2]) == [0, 1, 2], tail
    ignored = int(lines[-1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1)), tail


def test_a_task_with_a_directory_starts_there(tmp_path: Path) -> None:
    here = tmp_path / "here"
    here.mkdir()
    result = run_process(["/bin/sh", "-c", "pwd"], env=dict(os.environ), cwd=str(here),
                         log_path=tmp_path / "log", stop=threading.Event(), timeout_s=None,
                         kill_timeout=5.0)
    assert (result.returncode, result.tail.strip()) == (0, str(here))

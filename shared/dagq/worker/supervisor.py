"""The per-task supervisor: a task's whole process tree lives no longer than its worker.

The worker starts every task through this script (``parentdeath.wrap``)::

    python -I -S supervisor.py WORKER_PID [--unset NAME | --set NAME=VALUE]... -- ARGV...

or, where it is built (``scripts/setup``, the worker images), through ``supervisor.c``
compiled, ``dagq-supervisor``, which does the same in about 1 ms instead of an
interpreter's 20; keep the two in step (``tests/worker/test_parentdeath.py`` runs both).

``-I -S`` and the modules it uses (``posix``, ``_signal``, ``_ctypes``: nothing of dagq,
no site packages) keep its start to little more than the interpreter's. It runs alone in
the session the worker made for the task, and

* makes itself a *child subreaper* (``PR_SET_CHILD_SUBREAPER``): descendants orphaned by
  a double fork or a ``setsid`` child whose parent exited are re-parented to it, so every
  process the task ever starts stays its descendant, whatever its group, session or
  environment;
* asks for SIGTERM when its parent dies (``PR_SET_PDEATHSIG``; signals are blocked and
  taken with ``sigtimedwait``, and the death is confirmed by ``getppid()``, also every
  few seconds without a signal; a worker that died before the request was made is seen
  the same way), then SIGKILLs every descendant, again until none is left, reaps them
  and exits;
* starts ARGV in a child with a SIGKILL parent-death signal of its own (should the
  supervisor itself be killed), default signal handling, an empty signal mask, and a
  session and process group of its own, as tasks always had (``kill -- -$$`` works);
* exits as the task's first process did: the same exit code, or killed by the same
  signal (without a core file of its own), so the worker reads the same return code;
* on a SIGTERM sent by the worker (a stop or a timeout: the worker signals the
  supervisor and every process group of the task's tree, ``proctree.signal_all``) it
  waits, once the first process has ended, for the rest of the tree too, which so stays
  covered during its grace. A SIGTERM from anyone else changes nothing; other signals
  stay blocked.

It first closes every descriptor above stderr it inherited (the worker may start it with
``posix_spawn``, which passes on whatever is not close-on-exec). Where the parent-death
signal or the subreaper cannot be set (not Linux) the supervisor executes ARGV in its
place, as if unwrapped.
"""

import posix

TYPE_CHECKING = False  # as ``typing.TYPE_CHECKING``, without importing typing (~10 ms)
if TYPE_CHECKING:
    import signal as _signal
else:
    import _signal  # loaded at interpreter start; ``signal`` would import enum

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
EXIT_USAGE = 2
"""The command line is not as ``USAGE`` says."""
EXIT_PARENT_GONE = 125
"""The worker died: the tree was killed."""
EXIT_CANNOT_RUN = 127
"""ARGV could not be executed (as a shell's "command not found")."""
SAFETY_POLL_S = 5.0
"""How often the parent is also checked without a signal."""


class _Prctl:
    """``prctl(2)`` through ``_ctypes`` (the ``ctypes`` package costs milliseconds)."""

    def __init__(self) -> None:
        import _ctypes

        class CInt(_ctypes._SimpleCData):  # type: ignore[type-arg]  # not generic at run time
            _type_ = "i"

        class CULong(_ctypes._SimpleCData):  # type: ignore[type-arg]
            _type_ = "L"

        class Fn(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL
            _restype_ = CInt
            _argtypes_ = (CInt, CULong, CULong, CULong, CULong)

        libc = _ctypes.dlopen(None)  # type: ignore[arg-type]  # the program's own symbols
        self._fn = Fn(_ctypes.dlsym(libc, "prctl"))

    def __call__(self, option: int, arg: int) -> bool:
        """True if ``prctl(option, arg, 0, 0, 0)`` succeeded."""
        result: int = self._fn(option, arg, 0, 0, 0)
        return result == 0


def _descendants(me: int) -> list[int]:
    """Live descendants of ``me`` (through /proc parent links)."""
    children: dict[int, list[int]] = {}
    try:
        names = posix.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            fd = posix.open(f"/proc/{name}/stat", posix.O_RDONLY)
            try:
                fields = posix.read(fd, 1024).rpartition(b")")[2].split()
            finally:
                posix.close(fd)
        except OSError:
            continue
        if len(fields) > 1 and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    todo = [me]
    while todo:
        for kid in children.get(todo.pop(), ()):
            found.append(kid)
            todo.append(kid)
    return found


def _parent_gone() -> None:
    """SIGKILL every descendant (again, until none is left), reap them all, exit."""
    me = posix.getpid()
    while True:
        for pid in _descendants(me):
            try:  # noqa: SIM105 (contextlib costs start-up time)
                posix.kill(pid, _signal.SIGKILL)
            except OSError:
                pass
        try:
            posix.waitpid(-1, 0)
            while posix.waitpid(-1, posix.WNOHANG)[0]:
                pass
        except ChildProcessError:
            break
    posix._exit(EXIT_PARENT_GONE)


def _exit_like(status: int, prctl: _Prctl) -> None:
    """End this process as the task's first process ended (wait status ``status``)."""
    if posix.WIFSIGNALED(status):
        sig = posix.WTERMSIG(status)
        prctl(PR_SET_DUMPABLE, 0)  # no core file of the supervisor
        try:  # noqa: SIM105 (contextlib costs start-up time)
            _signal.signal(sig, _signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            pass
        posix.kill(posix.getpid(), sig)
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, (sig,))
        posix._exit(128 + sig)
    posix._exit(posix.WEXITSTATUS(status) if posix.WIFEXITED(status) else 1)


def _exec(argv: list[str]) -> None:
    """Execute ``argv`` in this process, searching ``PATH`` as ``execvp`` does."""
    if "/" in argv[0]:
        posix.execv(argv[0], argv)
    path = posix.environ.get(b"PATH", b"/usr/local/bin:/usr/bin:/bin").decode()
    error: OSError = FileNotFoundError(2, "not found on PATH", argv[0])
    for folder in path.split(":"):
        try:
            posix.execv(f"{folder or '.'}/{argv[0]}", argv)
        except OSError as exc:
            error = exc
    raise error


def _spawn(argv: list[str], prctl: _Prctl) -> int:
    """Start ``argv`` in a child that dies with this process; its pid."""
    me = posix.getpid()
    pid = posix.fork()
    if pid:
        return pid
    try:
        prctl(PR_SET_PDEATHSIG, _signal.SIGKILL)
        if posix.getppid() != me:
            posix._exit(EXIT_PARENT_GONE)
        posix.setsid()
        _run_in_place(argv)
    finally:
        posix._exit(EXIT_CANNOT_RUN)  # never back into the supervisor's code


def _run_in_place(argv: list[str]) -> None:
    """Execute ``argv`` with default signal handling (as ``Popen`` does); exit 127 if it
    cannot be executed."""
    try:
        for sig in (_signal.SIGPIPE, _signal.SIGXFSZ):  # ignored by Python
            _signal.signal(sig, _signal.SIG_DFL)
        _signal.pthread_sigmask(_signal.SIG_SETMASK, ())
        _exec(argv)
    except BaseException as exc:
        try:
            posix.write(2, f"dagq: cannot run {argv[0]!r}: {exc}\n".encode())
        finally:
            posix._exit(EXIT_CANNOT_RUN)


def _from_parent(info: object, parent: int) -> bool:
    """True if the signal described by ``info`` was sent by the worker."""
    return getattr(info, "si_pid", None) == parent


def supervise(parent: int, argv: list[str]) -> None:
    """Run ``argv`` under supervision for the worker ``parent``; never returns."""
    waited = {_signal.SIGCHLD, _signal.SIGTERM}
    _signal.pthread_sigmask(_signal.SIG_BLOCK, _signal.valid_signals())
    try:
        prctl = _Prctl()
        supported = (prctl(PR_SET_CHILD_SUBREAPER, 1)
                     and prctl(PR_SET_PDEATHSIG, _signal.SIGTERM))
    except Exception:  # no _ctypes, no prctl: run unsupervised
        supported = False
    if not supported:
        _run_in_place(argv)
    if posix.getppid() != parent:  # the worker died before PR_SET_PDEATHSIG was set
        _parent_gone()
    early = _signal.sigtimedwait({_signal.SIGTERM}, 0)
    if early is not None and _from_parent(early, parent):  # stopped before it started
        _exit_like(int(_signal.SIGTERM), prctl)  # the wait status of "killed by SIGTERM"
    child = _spawn(argv, prctl)
    status: int | None = None
    stopping = False
    while True:
        info = _signal.sigtimedwait(waited, SAFETY_POLL_S)
        if posix.getppid() != parent:
            _parent_gone()
        if info is not None and info.si_signo == _signal.SIGTERM and _from_parent(info, parent):
            stopping = True
        left = True
        try:
            while True:
                pid, st = posix.waitpid(-1, posix.WNOHANG)
                if pid == 0:
                    break
                if pid == child:
                    status = st
        except ChildProcessError:
            left = False
        if status is not None and not (stopping and left):
            _exit_like(status, prctl)


USAGE = b"usage: supervisor.py WORKER_PID [--unset NAME | --set NAME=VALUE]... -- ARGV...\n"


def main(args: list[str]) -> None:
    """``WORKER_PID [--unset NAME | --set NAME=VALUE]... -- ARGV...``: supervise ARGV on
    behalf of the worker WORKER_PID, with the environment variables named put back as
    the task's environment has them (the interpreter's start may change ``LC_CTYPE``:
    the C locale coercion of PEP 538, which ``-I`` does not turn off)."""
    posix.closerange(3, max(posix.sysconf("SC_OPEN_MAX"), 3))  # nothing inherited
    sep = args.index("--") if "--" in args else -1
    pairs = [(args[i], args[i + 1]) for i in range(1, sep - 1, 2)]
    if (sep < 1 or sep == len(args) - 1 or not args[0].isdigit() or sep % 2 == 0
            or any(not (flag == "--unset" or (flag == "--set" and "=" in value))
                   for flag, value in pairs)):
        posix.write(2, USAGE)
        posix._exit(EXIT_USAGE)
    for flag, value in pairs:
        if flag == "--set":
            name, _, text = value.partition("=")
            posix.putenv(name, text)
        else:
            posix.unsetenv(value)
    supervise(int(args[0]), args[sep + 1:])


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])

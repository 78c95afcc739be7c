"""Task processes die with their worker: a parent-death signal set before the task starts.

A worker killed with SIGKILL (the OOM killer, a node lost, ``kill -9``) cannot stop its
tasks, and they run in their own sessions, so without help they keep running (and
holding GPUs) while their messages come back and another worker starts the same
attempts. ``wrap`` prefixes a task's command line with util-linux ``setpriv
--pdeathsig KILL --``, which asks Linux (``prctl(PR_SET_PDEATHSIG)``, see ``man 2
PR_SET_PDEATHSIG``) to SIGKILL the task when the thread that started it exits, and then
executes the task in its place: the worker's slot thread waits on the task for as long
as it runs, so that is the worker's death. (Setting it from Python between ``fork`` and
``exec`` would need a ``preexec_fn``, which can deadlock in a threaded process.) The
setting survives ``exec`` but not ``fork``: it covers the task's own process; processes
the task starts in the background are the process-tree clean-up's concern. Without
``setpriv`` (not Linux, a minimal image) commands run unwrapped.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence

_SETPRIV = shutil.which("setpriv")


def available() -> bool:
    """True where the parent-death signal can be set (``setpriv`` is installed)."""
    return _SETPRIV is not None


def wrap(argv: Sequence[str]) -> list[str]:
    """``argv`` run so that it gets SIGKILL when its worker dies (unchanged if it cannot)."""
    if _SETPRIV is None:
        return list(argv)
    return [_SETPRIV, "--pdeathsig", "KILL", "--", *argv]

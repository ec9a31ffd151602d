"""Child processes that die with their parent: no rank or worker outlives the process that started it.

A process started by :func:`mlsysrepro.core.dist.launch` or a :class:`mlsysrepro.core.tasks.TaskRunner` calls
:func:`die_with_parent` first. On Linux the kernel then sends it SIGKILL the moment its parent dies, however the
parent died (SIGTERM to ``run_all.sh``, SIGKILL to papermill, a kernel that exits with ``os._exit``), so training
never goes on in processes reparented to PID 1. Elsewhere it does nothing, and the launcher's own cleanup (which
runs on a normal exit or an exception) is all there is.

A program that is not ours (a notebook's kernel) is started through this file run as a script,
``python .../orphans.py PARENT_PID COMMAND [ARGS...]`` (:func:`main`): it asks to die with ``PARENT_PID`` and
becomes ``COMMAND`` (``exec``: the same process, the request kept). The file imports nothing of this package, so
starting a kernel costs no import of torch.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def die_with_parent(parent: int) -> None:
    """Ask for SIGKILL when the parent dies (``prctl(PR_SET_PDEATHSIG)``); exit now if ``parent``, the pid of the
    process that started this one, is already gone (it died before the request was made)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        os._exit(1)


def main(argv: list[str] | None = None) -> None:
    """``orphans.py PARENT_PID COMMAND [ARGS...]``: run COMMAND in this process (``execvp``) after
    :func:`die_with_parent` (``PARENT_PID``): how the runner starts a notebook's kernel, which a runner killed
    with SIGKILL would otherwise leave running, idle, under PID 1 or a child subreaper."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2 or not args[0].isdigit():
        raise SystemExit("usage: python orphans.py PARENT_PID COMMAND [ARGS...]")
    die_with_parent(int(args[0]))
    os.execvp(args[1], args[1:])


if __name__ == "__main__":
    main()

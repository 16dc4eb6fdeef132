"""Linux namespaces for the student's process: no network, and no escaping processes.

- ``unshare(CLONE_NEWNET)`` gives the child a network namespace of its own, with only a
  loopback interface that is down: it can create sockets but reach nothing, not even
  the grader's machine through 127.0.0.1.
- ``unshare(CLONE_NEWPID)`` puts every process the student's code starts into a PID
  namespace whose init is a tiny process that dies with the child. When init dies, the
  kernel kills everything in the namespace, including processes that called
  ``setsid()`` to leave the child's process group.

Both need CAP_SYS_ADMIN (root, or a user namespace); :func:`namespaces_available`
probes once per process.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal

from grader.sandbox.limits import die_with_parent

CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000


def _unshare(flags: int) -> None:
    if ctypes.CDLL(None, use_errno=True).unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), f"unshare({flags:#x}) failed")


def isolate() -> None:
    """Leave the network, and start the PID namespace that this process's children join."""
    _unshare(CLONE_NEWNET | CLONE_NEWPID)
    if os.fork() == 0:  # PID 1 of the new namespace
        _init()


def _init() -> None:
    """Reap orphans until the student's process dies, then die, taking the namespace along.
    Never returns. Signals from inside the namespace cannot kill it (it is init)."""
    die_with_parent()
    os.closerange(0, os.sysconf("SC_OPEN_MAX"))
    while True:
        try:
            os.wait()
        except ChildProcessError:
            signal.pause()
        except InterruptedError:
            pass


@functools.cache
def namespaces_available() -> bool:
    """Whether a child of this process can create its namespaces (probed in a throwaway fork)."""
    pid = os.fork()
    if pid == 0:
        try:
            _unshare(CLONE_NEWNET | CLONE_NEWPID)
        except OSError:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0

"""Linux namespaces for the student's process: no network.

``unshare(CLONE_NEWNET)`` after fork gives the child a network namespace of its own,
with only a loopback interface that is down: it can create sockets but reach nothing,
not even the grader's machine through 127.0.0.1. It needs CAP_SYS_ADMIN (root, or a
user namespace); :func:`network_isolation_available` probes once per process.
"""

from __future__ import annotations

import ctypes
import functools
import os

CLONE_NEWNET = 0x40000000


def unshare_network() -> None:
    if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) failed")


@functools.cache
def network_isolation_available() -> bool:
    """Whether a child of this process can leave the network (probed in a throwaway fork)."""
    pid = os.fork()
    if pid == 0:
        try:
            unshare_network()
        except OSError:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0

"""A trusted function run in a forked process of the grader, its bytes coming back over a pipe.

The grader forks for each submission's suite (:class:`grader.engine.runner.ForkedRun`) and for
each suite value computed once (:func:`grader.engine.collected.compute_suite_values`): the fork
holds what the grader holds, and whatever it does (a suite's tests, torch's ops and threads)
leaves the grader as it was. Both read the pipe with a deadline, kill a fork that outlives it,
and reap it.
"""

from __future__ import annotations

import gc
import os
import resource
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable

from grader.sandbox.limits import die_with_parent


class Forked:
    """``produce`` running in a forked process; the bytes it returns come back over a pipe.

    Non-blocking, so one process can drive many (batch grading ``select``s on
    :meth:`fileno`); :meth:`wait` blocks. A ``produce`` that raises sends nothing and exits
    with status 1; its traceback is printed only under ``GRADER_DEBUG=1``, as is all the
    fork's output.
    """

    def __init__(self, produce: Callable[[], bytes], timeout_s: float):
        self.ended: tuple[int, resource.struct_rusage] | None = None  # wait status and resource usage, once reaped
        read_end, write_end = os.pipe()
        gc.freeze()  # the fork's collections then skip (and so do not copy) the pages of what this process holds
        try:
            pid = os.fork()
        except BaseException:  # no room for a process, say: the batch goes on, so no descriptor may leak
            os.close(read_end)
            os.close(write_end)
            raise
        if pid == 0:
            os.close(read_end)
            _serve(produce, write_end)
        os.close(write_end)
        self.pid = pid
        self.deadline = time.monotonic() + timeout_s
        self._fd = read_end
        self._chunks: list[bytes] = []
        self._done = False

    def fileno(self) -> int:
        return self._fd

    def poll(self) -> bool:
        """Read what is there without blocking; True once all of it is in."""
        while not self._done and self._fd >= 0:
            readable, _, _ = select.select([self._fd], [], [], 0)
            if not readable:
                break
            chunk = os.read(self._fd, 1 << 20)
            if chunk:
                self._chunks.append(chunk)
            else:
                self._done = True
        return self._done

    def wait(self) -> None:
        """Block until all of it is in or the deadline passes."""
        while not self.poll() and time.monotonic() < self.deadline:
            select.select([self._fd], [], [], max(self.deadline - time.monotonic(), 0))

    def take(self) -> bytes | None:
        """What the fork sent, or None if it has not sent all of it; either way the fork is
        ended (killed if still running) and reaped: :attr:`ended` says how."""
        try:
            done = self.poll()
        finally:
            self.close()
        return b"".join(self._chunks) if done else None

    def exited_cleanly(self) -> bool:
        """Whether the reaped fork exited with status 0."""
        return self.ended is not None and os.waitstatus_to_exitcode(self.ended[0]) == 0

    def close(self) -> None:
        """Kill the fork if it has not sent all it had, and reap it. Idempotent."""
        if self._fd < 0:
            return
        if not self._done:
            os.kill(self.pid, signal.SIGKILL)
        os.close(self._fd)
        self._fd = -1
        _, status, usage = os.wait4(self.pid, 0)
        self.ended = status, usage


def _serve(produce: Callable[[], bytes], write_end: int) -> None:
    """In the fork: write what ``produce`` returns, exit. Never returns."""
    code = 0
    die_with_parent()  # a killed grader takes its forks (and a suite's zygote and children) along
    try:
        if not os.environ.get("GRADER_DEBUG"):
            _silence_stdio()
        data = produce()
    except BaseException:  # noqa: BLE001 - the parent learns of it from the exit status
        traceback.print_exc()
        data, code = b"", 1
    try:
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(data)
    finally:
        os._exit(code)


def _silence_stdio() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    # sys.stdout may not be fd 1 (under pytest's capture it is a file of its own).
    sys.stdout = sys.stderr = open(os.devnull, "w")

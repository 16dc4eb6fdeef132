"""Resource limits of grading one submission (its student processes, and the trusted suite
process's own bounds), and how to describe them in words."""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Limits:
    # CPU time for one call into student code (the submission's processes together, where its
    # cgroup accounts them; else the process tree's), waited for at most three times as long
    # (child_process.WALL_PER_CPU_SECOND): of a call the reference cannot time (hung_calls.py).
    call_timeout_s: float = 10.0
    # A call gets call_floor_s; one still running then, call_slowdown times the reference's time
    # for it, as much of student_time_s as that is (07's 100 training steps of a GPT that
    # computes attention one scalar at a time take minutes). Calls that may run the code of a
    # function that timed out get hung_call_slowdown times it, at least hung_call_timeout_s and
    # at most call_timeout_s (hung_calls.py).
    call_floor_s: float = 1.0
    # A table built element by element in Python loops takes 650 times the reference's
    # vectorised time (04's sinusoidal_encoding(5000, 64): 1.8 s against 2.8 ms).
    call_slowdown: float = 3000.0
    # And at least this much per element of the call's tensor arguments: a loop that makes a
    # few torch operations for each element (02's dropout, one torch.rand per element: 26 us
    # each, 3800 times the reference's time) keeps its marks.
    call_per_element_s: float = 1e-4
    hung_call_timeout_s: float = 0.1
    hung_call_slowdown: float = 300.0  # a loop 100 times slower than the reference, with room to spare
    cell_timeout_s: float = 10.0  # wall clock for one notebook cell (or a .py's top level)
    load_timeout_s: float = 60.0  # wall clock for running all of a submission's cells, each time a child starts
    student_time_s: float = 300.0  # wall clock for all of one submission's code, over every call and child
    # Of each process: its address space (CPU) or share of GPU memory (CUDA); and of all the
    # submission's processes together, their memory (a memory cgroup).
    memory_bytes: int = 4 * 2**30
    output_bytes: int = 16 * 2**10  # of stdout/stderr kept for the report
    file_bytes: int = 64 * 2**20  # largest file the child may write
    scratch_bytes: int = 256 * 2**20  # all its files together (a tmpfs, with namespaces)
    scratch_files: int = 4096  # and how many there may be
    open_files: int = 256  # descriptors open at once
    processes: int = 128  # processes and threads of one submission's children at once (a pids cgroup)
    cpu_seconds: int = 600  # CPU time over the child's whole life; a backstop only
    threads: int = 1  # torch intra-op threads in the child; CPUs all the submission's processes get (a cpu cgroup)
    # The trusted suite process's own bounds (trusted_bounds.py): what the values a submission
    # returns can make it spend. What it needs, measured on 01-07 with the reference: under
    # 50 MiB, 0.7 s of CPU in all and 0.33 s for one test.
    suite_memory_bytes: int = 2 * 2**30  # beyond what it holds when it starts
    suite_test_cpu_s: int = 30  # for one test's setup, call and teardown
    suite_cpu_s: int = 120  # for everything it does

    def describe_memory(self) -> str:
        return f"memory limit of {format_bytes(self.memory_bytes)} exceeded"


@dataclass(frozen=True)
class CallLimit:
    """A call's limit in CPU seconds: ``first_s``; a call still running then is given the limit
    ``final()`` returns (asked at most once; None: ``first_s`` is all it gets), with, where it is
    shorter than the per-call limit, why."""

    first_s: float
    final: Callable[[], tuple[float, str | None]] | None = None


def format_bytes(size: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.3g} {unit}"
        size /= 1024
    return f"{size:.3g} GiB"


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies, so none outlives grading."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


OOM_SCORE_NEVER, OOM_SCORE_FIRST = -1000, 1000  # the ends of /proc/PID/oom_score_adj


def set_oom_score(adjustment: int) -> None:
    """How readily the kernel's OOM killer picks this process (and, by default, what it forks).
    Best effort: lowering the score needs CAP_SYS_RESOURCE."""
    try:
        with open("/proc/self/oom_score_adj", "w") as file:
            file.write(str(adjustment))
    except OSError:
        pass


def fork_when_room(wait_s: float = 2.0) -> int:
    """fork, waiting while the pids cgroup is full of a killed child's processes that
    have not finished dying (a fork bomb's, say)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return os.fork()
        except BlockingIOError:  # EAGAIN: the cgroup is full
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.01)

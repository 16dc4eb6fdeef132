"""Bounds on the trusted suite process itself, per submission: memory, and CPU time per test
and in all.

The suite process computes with what the student's process returns. Every value is meant
to be checked before it is used, but one that slips past a check (a token id of 150,000,000
that sizes a histogram, say) must fail that submission's test, never exhaust the machine
that grades the whole class. So, from :func:`apply` on:

- **memory**: RLIMIT_DATA, the process's private writable memory (heap, tensors), at what it
  holds then plus ``Limits.suite_memory_bytes``: past it an allocation fails (torch raises
  "can't allocate memory", Python MemoryError). Not RLIMIT_AS, which counts address space
  CUDA reserves and never uses.
- **CPU time per test**: RLIMIT_CPU's soft limit, moved to ``Limits.suite_test_cpu_s`` past
  what the process has used when each test starts (:meth:`CpuBudget.start_test`); past it
  the kernel sends SIGXCPU, which raises :class:`TrustedBoundExceeded` in the test.
- **CPU time in all**: RLIMIT_CPU's hard limit, ``Limits.suite_cpu_s``; past it the kernel
  kills the process (a computation stuck in one C++ call never returns to Python to raise).
  :func:`killed_for_cpu` tells the grader that this is how it ended.

A fork's CPU time starts at zero, so the bounds are the submission's alone.
"""

from __future__ import annotations

import os
import resource
import signal
import time
from pathlib import Path

import torch

from grader.sandbox.limits import Limits, format_bytes


class TrustedBoundExceeded(BaseException):
    """The trusted side ran out of its CPU time for one test. A BaseException, so that no
    ``except Exception`` in a suite's code swallows it."""


def apply(limits: Limits, device: str) -> CpuBudget:
    """Bound this (the suite) process, which computes on ``device``; returns the budget to
    start each test with."""
    if device.startswith("cuda"):  # CUDA's own host memory, taken once, is not the submission's
        torch.empty(1, device=device)
    private = _status_bytes("VmData")
    if private is not None:
        memory = private + limits.suite_memory_bytes
        resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    return CpuBudget(limits)


def memory_exhausted(exc: BaseException) -> bool:
    """Whether ``exc``, raised in this process, is an allocation that failed at the memory
    bound (or an out-of-memory device)."""
    if isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "not enough memory" in text)


def killed_for_cpu(status: int, usage: resource.struct_rusage, limits: Limits) -> bool:
    """Whether the suite process with wait ``status`` and resource ``usage`` was killed at its
    CPU-time bound (the kernel's SIGKILL at RLIMIT_CPU's hard limit)."""
    return (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
            and usage.ru_utime + usage.ru_stime >= limits.suite_cpu_s - 1)


def describe_memory(limits: Limits) -> str:
    return f"its memory bound of {format_bytes(limits.suite_memory_bytes)}"


class CpuBudget:
    """RLIMIT_CPU's soft limit as a budget per test (see the module's docstring)."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self._armed = False
        signal.signal(signal.SIGXCPU, self._exceeded)
        resource.setrlimit(resource.RLIMIT_CPU, (limits.suite_cpu_s, limits.suite_cpu_s))

    def start_test(self) -> None:
        soft = min(int(time.process_time()) + 1 + self.limits.suite_test_cpu_s, self.limits.suite_cpu_s)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, self.limits.suite_cpu_s))
        self._armed = True

    def end_test(self) -> None:
        self._disarm()

    def _disarm(self) -> None:
        self._armed = False
        resource.setrlimit(resource.RLIMIT_CPU, (self.limits.suite_cpu_s, self.limits.suite_cpu_s))

    def _exceeded(self, signum: int, frame: object) -> None:
        if self._armed:  # between tests only the hard limit holds
            self._disarm()
            raise TrustedBoundExceeded(f"its CPU-time bound of {self.limits.suite_test_cpu_s:g} s per test")


def _status_bytes(field: str) -> int | None:
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key == field:
            return int(value.split()[0]) * 1024
    return None

"""The zygote server's heap on huge pages: dense memory moves, sparse memory is not filled."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")

# Run apart from pytest's process, so its own heap does not blur the figures: 64 MiB written
# through (dense), and 64 MiB mapped with one byte written in each 2 MiB (sparse: 128 KiB resident).
PROBE = """
import mmap, sys
from grader.sandbox import huge_pages

def figure(key):
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024

private = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
dense = mmap.mmap(-1, 64 << 20, flags=private)
dense.write(b"x" * (64 << 20))
sparse = mmap.mmap(-1, 64 << 20, flags=private)
for offset in range(0, 64 << 20, 2 << 20):
    sparse[offset] = 1
before = figure("Rss")
moved = huge_pages.collapse_heap()
print(moved, figure("AnonHugePages"), figure("Rss") - before)
"""


def _kernel_collapses() -> bool:
    """MADV_COLLAPSE is Linux 6.1's, and THP must not be switched off."""
    major, minor = (int(part) for part in platform.release().split(".")[:2])
    return (major, minor) >= (6, 1) and THP.exists() and "[never]" not in THP.read_text()


def test_dense_memory_moves_onto_huge_pages_and_sparse_memory_is_left_as_it_is():
    moved, huge, grown = map(int, subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, check=True,
                                                 capture_output=True, text=True,
                                                 env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.split())
    # Resident memory does not grow: a sparse block collapsed would have filled its 2 MiB.
    assert grown < 4 << 20
    if not _kernel_collapses():
        pytest.skip("this kernel has no MADV_COLLAPSE, or THP is off: collapse_heap does nothing")
    # The dense 64 MiB: at least 62 of it, whatever its alignment to 2 MiB.
    assert moved >= 62 << 20 and huge >= 62 << 20

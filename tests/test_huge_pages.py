"""The zygote server's heap on huge pages: dense memory moves, sparse memory is not filled."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from grader.sandbox import huge_pages, zygote
from tests.conftest import ROOT

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")

# Run apart from pytest's process, so its own heap does not blur the figures: 64 MiB written
# through (dense), and 64 MiB mapped with one byte written in each 2 MiB (sparse: 128 KiB resident).
PROBE = """
import mmap, sys
from grader.sandbox import huge_pages, zygote

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
moved = sum(huge_pages._huge_page_size() for block in huge_pages.heap_blocks() if huge_pages.collapse_block(block))
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
        pytest.skip("this kernel has no MADV_COLLAPSE, or THP is off: collapse_block does nothing")
    # The dense 64 MiB: at least 62 of it, whatever its alignment to 2 MiB.
    assert moved >= 62 << 20 and huge >= 62 << 20


def test_heap_blocks_are_aligned_and_inside_private_anonymous_memory():
    blocks = huge_pages.heap_blocks()
    if not _kernel_collapses():
        assert blocks == []
        return
    huge = huge_pages._huge_page_size()
    ranges = huge_pages._private_anonymous_ranges()
    assert blocks and blocks == sorted(blocks)
    assert all(block % huge == 0 for block in blocks)
    assert all(any(start <= block and block + huge <= end for start, end in ranges) for block in blocks)


def test_the_zygote_server_stops_moving_its_heap_as_soon_as_a_request_waits(monkeypatch):
    """The server moves its heap a block at a time between requests: a submission's zygote
    waits for one block at most, never for the whole heap (a second on a virtual machine)."""
    server, grader = socket.socketpair()
    moved = []

    def collapse(block):
        moved.append(block)
        if len(moved) == 3:
            grader.send(b"{}")  # a submission arrives while the third block moves

    monkeypatch.setattr(huge_pages, "collapse_block", collapse)
    blocks = [50, 40, 30, 20, 10]
    zygote.move_heap_while_idle(server, blocks)
    assert moved == [10, 20, 30] and blocks == [50, 40]  # the request is served before the rest
    server.recv(16)
    zygote.move_heap_while_idle(server, blocks)  # and the rest moves once none waits
    assert moved == [10, 20, 30, 40, 50] and blocks == []
    server.close()
    grader.close()

"""Cheaper forks of a process that holds torch: its heap on transparent huge pages.

A fork copies the page table of every private page its parent wrote, and an exit tears
that table down. After ``import torch`` that is some 180 MiB of heap, 45,000 entries of
4 KiB: about 5 ms for each fork and as much again for each exit, and every student child
costs two forks (its submission zygote's share and the student's process; see
namespaces.py). On 2 MiB pages the same heap is 90 entries. A child that writes to a
shared huge page gets a private copy of the 4 KiB it wrote, as before; only the parent's
table is coarser.

:func:`collapse_block` asks the kernel (``MADV_COLLAPSE``, Linux 6.1) to move one 2 MiB block
of the process's heap (:func:`heap_blocks`) onto a huge page now, once the heap is built and
before the forks. It touches only blocks that are already almost all resident, so the resident
memory stays as it was (a sparse block collapsed would fill its holes), and it changes no
policy: memory the process maps later gets the machine's default pages. Where the kernel cannot
(older, or THP set to ``never``), nothing happens. A child forked before the call keeps the old
pages, which become its own: call it where such children are few and short-lived. A block at a
time, because on this project's virtual machines the whole heap takes the kernel about a second,
and the process that does it (the zygote server) answers requests between two blocks.
"""

from __future__ import annotations

import ctypes
import functools
import os

_MADV_COLLAPSE = 25
_HUGE_PAGE_SIZE = "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size"
_RESIDENT_SHARE = 0.9  # of a block's base pages: collapse it only where that many are in memory


def heap_blocks() -> list[int]:
    """The addresses of the huge-page-sized blocks of this process's private anonymous memory,
    in address order, each for :func:`collapse_block` (none where the kernel has no huge pages).
    One block at a time, so that a process that also serves requests can answer between two."""
    huge = _huge_page_size()
    if not huge:
        return []
    return [block for start, end in _private_anonymous_ranges()
            for block in range(-(-start // huge) * huge, end - huge + 1, huge)]


def collapse_block(block: int) -> bool:
    """Move the block at ``block`` onto one huge page if it is almost all resident; whether it
    is on one now. A block took 10-15 ms of the kernel's time on the development machine."""
    huge = _huge_page_size()
    residency = ctypes.create_string_buffer(huge // os.sysconf("SC_PAGE_SIZE"))
    if _libc().mincore(block, huge, residency) != 0:
        return False
    absent = residency.raw.count(0)  # the low bit of each page's byte: resident
    if absent > (1 - _RESIDENT_SHARE) * len(residency.raw):
        return False
    return _libc().madvise(block, huge, _MADV_COLLAPSE) == 0  # else: not this block, or not this kernel


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    return libc


@functools.cache
def _huge_page_size() -> int:
    try:
        with open(_HUGE_PAGE_SIZE) as file:
            return int(file.read())
    except (OSError, ValueError):
        return 0


def _private_anonymous_ranges() -> list[tuple[int, int]]:
    ranges = []
    with open(f"/proc/{os.getpid()}/maps") as maps:
        for line in maps:
            fields = line.split()
            name = fields[5] if len(fields) > 5 else ""
            if fields[1].startswith("rw") and fields[1][3] == "p" and name in ("", "[heap]"):
                start, end = (int(address, 16) for address in fields[0].split("-"))
                ranges.append((start, end))
    return ranges

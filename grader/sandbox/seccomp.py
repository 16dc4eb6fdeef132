"""A seccomp filter: system calls a submission never needs fail with EPERM.

The other layers already take away what these calls could reach (no capabilities, own
namespaces, Landlock); the filter shrinks the kernel surface left, for the case where a
kernel bug makes one of them dangerous anyway: tracing and cross-process memory access,
mounting and namespaces, BPF and perf events, keyrings, io_uring, userfaultfd, modules,
kexec and the like. It is a deny list, so a submission's ordinary calls (files, threads,
memory, fork) work as before. Some calls are looked at more closely:

- ``clone`` with a flag for a new namespace is refused like ``unshare``: in a user namespace
  of its own, a process without capabilities has them all again, and with them the kernel's
  netfilter and mount code. ``clone3`` passes its flags in memory, which a filter cannot
  read, so it fails with ENOSYS, and the C library falls back to ``clone`` for threads;
- ``socket`` opens only the families of the network namespace, which reaches nothing: a
  ``vsock`` socket (a VM's line to its host) is not namespaced, and of netlink only the
  routing protocol (the kernel's device events reach every network namespace);
- ``prctl(PR_SET_PDEATHSIG)`` is refused: the student's process, PID 1 of its namespace,
  ends with its submission's zygote (and so with the grader) by that signal, and its code
  could otherwise clear it and outlive a grader that was killed;
- what tells or sets which pages of a file are in the machine's page cache (``mincore``,
  ``cachestat``, ``fadvise`` to drop pages, ``madvise`` to page them out, a read or write that
  must not wait for the disk): every process may read the Python installation, so its
  pages' presence would be a channel between processes that must not talk (one that was
  sent answers, and a later one; see docs/security.md for what is left of it);
- ``inotify_init``, ``mq_open`` and ``io_setup``: inotify instances, POSIX message queues'
  bytes and AIO contexts are counted per uid or for the whole machine, the grader's processes
  included, so a submission must not take them all.

The numbers are x86-64's, the architecture this grader is tested on; elsewhere the layer
is reported missing. x32 system calls (the same numbers with bit 30 set) are refused too,
and a call made under another architecture's ABI kills the process.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import platform

_PR_SET_NO_NEW_PRIVS, _PR_GET_SECCOMP, _PR_SET_SECCOMP = 38, 21, 22
_SECCOMP_MODE_FILTER = 2
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_RET_KILL_PROCESS, _RET_ERRNO, _RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_NR_OFFSET, _ARCH_OFFSET = 0, 4  # in struct seccomp_data; argument N's low 32 bits at 16 + 8 N
_CLONE3, _SOCKET = 435, 41
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
_CLONE_NEW_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
_PR_SET_PDEATHSIG = 1
_POSIX_FADV_DONTNEED, _POSIX_FADV_NOREUSE = 4, 5
_MADV_COLD, _MADV_PAGEOUT = 20, 21
_RWF_NOWAIT = 0x8
# Calls refused for one of their arguments: number -> (argument, "bits" (any of them set) or
# "values" (equal to one of them), what).
DENIED_ARGUMENTS_X86_64 = {
    56: (0, "bits", _CLONE_NEW_NAMESPACES),  # clone into a new namespace
    157: (0, "values", (_PR_SET_PDEATHSIG,)),  # prctl: the death signal stays
    221: (3, "values", (_POSIX_FADV_DONTNEED, _POSIX_FADV_NOREUSE)),  # fadvise64: no page dropped
    28: (2, "values", (_MADV_COLD, _MADV_PAGEOUT)),  # madvise: no page sent out
    327: (5, "bits", _RWF_NOWAIT),  # preadv2 that fails where a page is not cached
    328: (5, "bits", _RWF_NOWAIT),  # pwritev2, the same
}
_SOCKET_FAMILIES = (1, 2, 10)  # AF_UNIX, AF_INET, AF_INET6
_AF_NETLINK, _NETLINK_ROUTE = 16, 0  # netlink: only its routing protocol (getaddrinfo, if_nameindex)

DENIED_X86_64 = {
    "ptrace": 101, "syslog": 103, "personality": 135, "vhangup": 153, "pivot_root": 155, "chroot": 161,
    "acct": 163, "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168,
    "reboot": 169, "iopl": 172, "ioperm": 173, "init_module": 175, "delete_module": 176, "quotactl": 179,
    "clock_settime": 227, "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250,
    "unshare": 272, "perf_event_open": 298, "name_to_handle_at": 303, "open_by_handle_at": 304,
    "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311, "finit_module": 313,
    "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442, "inotify_init": 253, "inotify_init1": 294,
    "fanotify_init": 300, "mq_open": 240, "io_setup": 206, "mincore": 27, "cachestat": 451,
    "process_madvise": 440,
}


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


@functools.cache
def available() -> bool:
    """x86-64, and a kernel with seccomp filters."""
    if platform.machine() != "x86_64":
        return False
    return ctypes.CDLL(None, use_errno=True).prctl(_PR_GET_SECCOMP, 0, 0, 0, 0) >= 0


def _program() -> list[tuple[int, int, int, int]]:
    def to(label: str) -> tuple[str]:
        return (label,)

    denied = sorted(DENIED_X86_64.values())
    listing = [
        (_LD_W_ABS, 0, 0, _ARCH_OFFSET),
        (_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),
        (_LD_W_ABS, 0, 0, _NR_OFFSET),
        (_JGE_K, to("deny"), 0, _X32_SYSCALL_BIT),
        *((_JEQ_K, to("deny"), 0, number) for number in denied),
        (_JEQ_K, to("enosys"), 0, _CLONE3),
        *((_JEQ_K, to(f"arguments of {number}"), 0, number) for number in DENIED_ARGUMENTS_X86_64),
        (_JEQ_K, to("socket"), 0, _SOCKET),
        (_RET_K, 0, 0, _RET_ALLOW),
        *(item for number, rule in DENIED_ARGUMENTS_X86_64.items() for item in _argument_check(number, *rule)),
        "socket", (_LD_W_ABS, 0, 0, _argument_offset(0)),
        *((_JEQ_K, to("allow"), 0, family) for family in _SOCKET_FAMILIES),
        (_JEQ_K, 0, to("deny"), _AF_NETLINK),
        (_LD_W_ABS, 0, 0, _argument_offset(2)),
        (_JEQ_K, to("allow"), 0, _NETLINK_ROUTE),
        "deny", (_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),
        "allow", (_RET_K, 0, 0, _RET_ALLOW),
        "enosys", (_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),
    ]
    return _resolve(listing)


def _argument_offset(argument: int) -> int:
    return 16 + 8 * argument


def _argument_check(number: int, argument: int, how: str, denied) -> list:
    """The instructions, labelled for ``number``, that refuse the call where ``argument``
    has any of the bits ``denied`` (``how`` "bits") or equals one of them ("values")."""
    if how == "bits":
        tests = [(_JSET_K, ("deny",), 0, denied)]
    else:
        tests = [(_JEQ_K, ("deny",), 0, value) for value in denied]
    return [f"arguments of {number}", (_LD_W_ABS, 0, 0, _argument_offset(argument)), *tests,
            (_RET_K, 0, 0, _RET_ALLOW)]


def _resolve(listing: list) -> list[tuple[int, int, int, int]]:
    """The instructions of ``listing``, in which a string labels the next instruction and a
    jump's ``(label,)`` goes there: jumps are counted from the instruction after them."""
    labels, count = {}, 0
    for item in listing:
        if isinstance(item, str):
            labels[item] = count
        else:
            count += 1
    program: list[tuple[int, int, int, int]] = []
    for item in listing:
        if isinstance(item, str):
            continue
        code, if_true, if_false, k = item
        here = len(program) + 1
        jumps = [labels[jump[0]] - here if isinstance(jump, tuple) else jump for jump in (if_true, if_false)]
        if not all(0 <= jump <= 255 for jump in jumps):  # a jump is one byte: it would wrap silently
            raise ValueError(f"a jump of {jumps} instructions does not fit the filter")
        program.append((code, *jumps, k))
    return program


def restrict() -> None:
    """Install the filter on this process and its future children. Irreversible."""
    libc = ctypes.CDLL(None, use_errno=True)
    instructions = _program()
    filters = (_SockFilter * len(instructions))(*(_SockFilter(*ins) for ins in instructions))
    program = _SockFprog(len(instructions), filters)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "installing the seccomp filter failed")

"""Landlock (Linux >= 5.13): what the student's process may open, from inside the process.

The child may read (and execute) the Python installation and the system directories,
and read and write only its scratch directory (and its own ``/tmp`` and ``/dev/shm`` where
the namespaces give it them); everything else, the grader's checkout
with the reference and the hidden suites included, cannot be opened. Descriptors
already open (its socket, stdout) keep working. Applied after fork and before the first
cell; it cannot be undone by the process. Without kernel support the child runs without
it and the report's ``sandbox`` field does not list it. From ABI 6 on, the process also
cannot signal processes outside its sandbox (the grader's, say), which matters where
there is no PID namespace.
"""

from __future__ import annotations

import ctypes
import functools
import os
import site
import sys

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_READ = _EXECUTE | _READ_FILE | _READ_DIR
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/sys", "/dev")
WRITABLE_FILES = (os.devnull,)  # student code may silence itself with open(os.devnull, "w")


# ABI 6: no signals to, and no abstract unix sockets of, processes outside the sandbox.
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 where there is none."""
    version = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def _handled_access(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: execute ... make_sym
    if abi >= 2:
        rights |= 1 << 13  # refer
    if abi >= 3:
        rights |= 1 << 14  # truncate
    if abi >= 5:
        rights |= 1 << 15  # ioctl_dev
    return rights


@functools.cache  # a student's process asks twice: for its view of the filesystem, then for Landlock's rules
def readable_roots() -> tuple[str, ...]:
    """What the child may read: Python (installation, environment, site-packages) and the system."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable)),
             *site.getsitepackages(), *SYSTEM_DIRS}
    return tuple(sorted(path for path in roots if os.path.isdir(path)))


def covers(roots: list[str], path: str) -> bool:
    """Whether ``path`` lies inside one of ``roots`` (and would so be readable)."""
    real = os.path.realpath(path)
    return any(real == root or real.startswith(os.path.realpath(root).rstrip("/") + "/") for root in roots)


def restrict(writable: tuple[str, ...]) -> None:
    """Confine this process: read ``readable_roots()``, read and write the directories
    ``writable``. Irreversible."""
    libc = _libc()
    abi = abi_version()
    if abi < 1:
        raise OSError("Landlock is not available")
    handled = _handled_access(abi)
    if abi >= 6:
        ruleset, size = _RulesetAttr(handled, 0, _SCOPE_SIGNAL | _SCOPE_ABSTRACT_UNIX_SOCKET), ctypes.sizeof(_RulesetAttr)
    else:  # older kernels reject a struct larger than they know
        ruleset, size = _RulesetAttr(handled), _RulesetAttr.handled_access_fs.size
    ruleset_fd = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(ruleset), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset_fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        file_rights = _EXECUTE | _WRITE_FILE | _READ_FILE | (1 << 14 if abi >= 3 else 0)  # + truncate
        rules = [(root, _READ) for root in readable_roots()] + [(path, handled) for path in writable]
        rules += [(path, (_READ_FILE | _WRITE_FILE | (1 << 14 if abi >= 3 else 0))) for path in WRITABLE_FILES]
        for path, access in rules:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                # A rule on a file may only carry rights that apply to files.
                allowed = access & handled if os.path.isdir(path) else access & handled & file_rights
                rule = _PathBeneathAttr(allowed, fd)
                if libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset_fd), ctypes.c_int(_RULE_PATH_BENEATH),
                                ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
        if libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset_fd), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset_fd)

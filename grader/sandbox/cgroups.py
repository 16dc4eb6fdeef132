"""A pids cgroup per submission: a fork bomb stops at ``Limits.processes``.

RLIMIT_NPROC cannot do this job: the kernel never applies it to uid 0, and the student's
process keeps uid 0 (see :mod:`grader.sandbox.namespaces`). The cgroup's ``pids.max``
counts every process and thread of the zygote and its children, the student's included,
whatever user or namespace they are in, and ``fork`` fails with EAGAIN past it.

Works with a writable pids controller: cgroup v1's ``/sys/fs/cgroup/pids`` or a v2
hierarchy that delegates ``pids`` to this process's cgroup. Elsewhere
:func:`available` is False and the layer is missing (``--sandbox basic`` warns).
"""

from __future__ import annotations

import functools
import os
import signal
import time
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
_PARENT_NAME = "transformer-grader"


def _own_pids_directory() -> Path | None:
    """This process's cgroup in a hierarchy with the pids controller, if there is one."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        hierarchy, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):  # v1
            mount = CGROUP_ROOT / "pids"
        elif hierarchy == "0" and "pids" in _read(CGROUP_ROOT / path.lstrip("/") / "cgroup.subtree_control"):  # v2
            mount = CGROUP_ROOT
        else:
            continue
        own = mount / path.lstrip("/")
        return own if own.is_dir() else mount
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@functools.cache
def _parent() -> Path | None:
    """Where this grader's cgroups go, created on first use; None if they cannot be."""
    own = _own_pids_directory()
    if own is None:
        return None
    parent = own / _PARENT_NAME
    try:
        parent.mkdir(exist_ok=True)
        probe = parent / f"probe-{os.getpid()}"
        probe.mkdir()
        ok = (probe / "pids.max").is_file()
        probe.rmdir()
    except OSError:
        return None
    return parent if ok else None


def available() -> bool:
    return _parent() is not None


def wait_for_room(needed: int, wait_s: float = 2.0) -> None:
    """Return once this process's pids cgroup can take ``needed`` more tasks, or after
    ``wait_s``. A killed predecessor's processes may still be dying; their number only
    goes down. Returns at once outside a limited pids cgroup."""
    own = _own_pids_directory()
    deadline = time.monotonic() + wait_s
    while own is not None:
        maximum = _read(own / "pids.max").strip()
        current = _read(own / "pids.current").strip()
        if not (maximum.isdigit() and current.isdigit()) or int(current) + needed <= int(maximum):
            return
        if time.monotonic() >= deadline:
            return
        time.sleep(0.01)


class PidsCgroup:
    """One submission's cgroup. Created and removed by the trusted side."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def create(cls, name: str, max_processes: int) -> PidsCgroup:
        parent = _parent()
        if parent is None:
            raise OSError("no writable pids cgroup here")
        path = parent / name
        path.mkdir()
        (path / "pids.max").write_text(str(max_processes))
        return cls(path)

    @classmethod
    def existing(cls, pattern: str) -> list[PidsCgroup]:
        """This grader's cgroups whose names match ``pattern`` (a glob)."""
        parent = _parent()
        return [cls(path) for path in parent.glob(pattern) if path.is_dir()] if parent else []

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def kill_all(self, wait_s: float = 2.0) -> None:
        """SIGKILL every process in the cgroup until none is left (a fork bomb may still be
        forking while the first ones die)."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            pids = [int(pid) for pid in _read(self.path / "cgroup.procs").split()]
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.005)

    def remove(self, wait_s: float = 2.0) -> None:
        """Remove the cgroup once its processes are gone (killed ones take a moment)."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() >= deadline:
                    return  # an empty cgroup left behind costs nothing; the next run is unaffected
                time.sleep(0.01)

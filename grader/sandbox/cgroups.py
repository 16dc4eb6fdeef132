"""A cgroup per submission: its processes together, whatever they fork, stay within its limits.

The per-process limits of :mod:`grader.sandbox.limits` do not add up: RLIMIT_NPROC is never
applied to uid 0 (and the student's process keeps uid 0, see
:mod:`grader.sandbox.namespaces`), and RLIMIT_AS bounds each process, so forked helpers
each get the whole limit again. The submission zygote joins the submission's cgroup before
it forks any child, so every process and thread of the submission counts, whatever user or
namespace it is in:

- **pids**: ``Limits.processes`` at once; past it ``fork`` fails with EAGAIN (a fork bomb);
- **memory**: ``Limits.memory_bytes`` for all of them together, swap included; past it the
  kernel's OOM killer ends the largest of them (:meth:`SubmissionCgroup.oom_kills` says so);
- **cpu**: at most ``Limits.threads`` CPUs' worth of time (a CFS quota), whatever the number
  of busy processes, so a submission cannot starve the one graded beside it; its usage is
  accounted (cgroup v1's ``cpuacct``, v2's ``cpu.stat``).

Works with cgroup v1 (a hierarchy per controller under ``/sys/fs/cgroup/<controller>``) or
v2 (one hierarchy, where this process's cgroup delegates the controller), where the grader
may write (root). Where a controller is missing, :func:`available` is False for it and the
layer is missing (``--sandbox basic`` warns, ``strict`` refuses).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
import weakref
from collections.abc import Iterable
from pathlib import Path

from grader.sandbox.limits import Limits

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("pids", "memory", "cpu")  # what a submission's cgroup limits
CPU_PERIOD_US = 100_000  # the CFS period the quota is a share of (the kernel's default)
_PARENT_NAME = "transformer-grader"
# A file each controller's cgroups have, on v1 and on v2: a probe cgroup that has it can be limited.
_PROBE_FILE = {"pids": ("pids.max", "pids.max"), "memory": ("memory.limit_in_bytes", "memory.max"),
               "cpu": ("cpu.cfs_quota_us", "cpu.max"), "cpuacct": ("cpuacct.usage", None)}


def _own_directory(controller: str) -> tuple[Path, bool] | None:
    """This process's cgroup in the hierarchy with ``controller``, and whether it is v2."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        hierarchy, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):  # v1
            mount, v2 = CGROUP_ROOT / controller, False
        elif hierarchy == "0" and controller in _read(CGROUP_ROOT / path.lstrip("/") / "cgroup.subtree_control").split():
            mount, v2 = CGROUP_ROOT, True  # v2: where this process's cgroup delegates the controller
        else:
            continue
        own = mount / path.lstrip("/")
        return (own if own.is_dir() else mount), v2
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@functools.cache
def _parent(controller: str) -> Path | None:
    """Where this grader's cgroups go in ``controller``'s hierarchy, created on first use;
    None if they cannot be."""
    own = _own_directory(controller)
    probe_file = _PROBE_FILE[controller][own[1]] if own else None
    if own is None or probe_file is None:
        return None
    parent = own[0] / _PARENT_NAME
    try:
        parent.mkdir(exist_ok=True)
        if own[1]:  # v2: the controller reaches the submissions' cgroups only when delegated
            (parent / "cgroup.subtree_control").write_text(f"+{controller}")
        if controller == "cpu":
            _weigh_as_one_process_per_cpu(parent, own[1])
        probe = parent / f"probe-{os.getpid()}"
        probe.mkdir()
        ok = (probe / probe_file).is_file()
        probe.rmdir()
    except OSError:
        return None
    return parent if ok else None


def _weigh_as_one_process_per_cpu(parent: Path, v2: bool) -> None:
    """The submissions' cgroups share their parent's weight against every other process on the
    machine: at a single process's default weight, all the students' processes together would
    get what one busy process gets, fewer CPUs than they did before they had cgroups. At one
    default weight per CPU, they get what as many busy processes would, each submission as one."""
    cpus = os.cpu_count() or 1
    if v2:
        (parent / "cpu.weight").write_text(str(min(100 * cpus, 10_000)))
    else:
        (parent / "cpu.shares").write_text(str(1024 * cpus))


def available(controller: str = "pids") -> bool:
    """Whether submissions' cgroups can be limited by ``controller`` here."""
    return _parent(controller) is not None


def _accounting() -> tuple[str, ...]:
    """Where CPU time is accounted apart from the cpu controller: v1's cpuacct, when it is a
    hierarchy of its own (v2's cpu.stat is in every cgroup)."""
    cpu, cpuacct = _parent("cpu"), _parent("cpuacct")
    return ("cpuacct",) if cpuacct is not None and (cpu is None or cpu.resolve() != cpuacct.resolve()) else ()


def wait_for_room(needed: int, wait_s: float = 2.0) -> None:
    """Return once this process's pids cgroup can take ``needed`` more tasks, or after
    ``wait_s``. A killed predecessor's processes may still be dying; their number only
    goes down. Returns at once outside a limited pids cgroup."""
    own = _own_directory("pids")
    deadline = time.monotonic() + wait_s
    while own is not None:
        maximum = _read(own[0] / "pids.max").strip()
        current = _read(own[0] / "pids.current").strip()
        if not (maximum.isdigit() and current.isdigit()) or int(current) + needed <= int(maximum):
            return
        if time.monotonic() >= deadline:
            return
        time.sleep(0.01)


class SubmissionCgroup:
    """One submission's cgroup: a directory in each hierarchy it spans (v1: one per
    controller; v2: one). Created and removed by the trusted side."""

    def __init__(self, directories: Iterable[Path]):
        self.directories = tuple(directories)
        self._cpu_usage: tuple[int, str] | None = None  # see cpu_seconds

    @classmethod
    def create(cls, name: str, controllers: Iterable[str], limits: Limits) -> SubmissionCgroup:
        """The cgroup ``name``, limited by each of ``controllers`` (see :data:`CONTROLLERS`)."""
        wanted = list(controllers)
        directories: dict[Path, None] = {}  # v2, or v1 controllers mounted together: one directory
        try:
            for controller in [*wanted, *(_accounting() if "cpu" in wanted else ())]:
                parent = _parent(controller)
                if parent is None:
                    raise OSError(f"no writable {controller} cgroup here")
                path = parent / name
                if path not in directories:
                    path.mkdir()
                    directories[path] = None
                if controller in CONTROLLERS:
                    _LIMIT[controller](path, limits)
        except BaseException:
            cls(directories).remove(wait_s=0)
            raise
        return cls(directories)

    @classmethod
    def existing(cls, pattern: str) -> list[SubmissionCgroup]:
        """This grader's cgroups whose names match ``pattern`` (a glob)."""
        found: dict[str, list[Path]] = {}
        for controller in (*CONTROLLERS, "cpuacct"):
            parent = _parent(controller)
            for path in parent.glob(pattern) if parent else ():
                if path.is_dir() and path not in found.setdefault(path.name, []):
                    found[path.name].append(path)
        return [cls(paths) for _, paths in sorted(found.items())]

    @property
    def name(self) -> str:
        return self.directories[0].name

    def add(self, pid: int) -> None:
        for directory in self.directories:
            (directory / "cgroup.procs").write_text(str(pid))

    def oom_kills(self) -> int:
        """How many of its processes the kernel has killed for the memory limit so far."""
        for directory in self.directories:
            for name in ("memory.events", "memory.oom_control"):  # v2, v1
                for line in _read(directory / name).splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and value.strip().isdigit():
                        return int(value)
        return 0

    def cpu_seconds(self) -> float | None:
        """CPU time all its processes have used so far, the dead included; None where no
        hierarchy it spans accounts it. Read at every look at a running call's clock, so the
        file that accounts it is found once and kept open (cgroup files read afresh from 0)."""
        if self._cpu_usage is None:
            self._cpu_usage = self._open_cpu_usage()
            if self._cpu_usage is None:
                return None
        fd, name = self._cpu_usage
        try:
            text = os.pread(fd, 4096, 0).decode("ascii", "replace")
        except OSError:
            return None
        if name == "cpu.stat":  # v2, in microseconds
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec" and value.strip().isdigit():
                    return int(value) / 1e6
            return None
        return int(text) / 1e9 if text.strip().isdigit() else None  # v1's cpuacct.usage, in nanoseconds

    def _open_cpu_usage(self) -> tuple[int, str] | None:
        for directory in self.directories:
            for name, accounts in (("cpu.stat", "usage_usec "), ("cpuacct.usage", "")):
                text = _read(directory / name)
                if text and accounts in text:
                    try:
                        fd = os.open(directory / name, os.O_RDONLY | os.O_CLOEXEC)
                    except OSError:
                        continue
                    weakref.finalize(self, os.close, fd)
                    return fd, name
        return None

    def processes(self) -> set[int]:
        """The pids of the processes in it now."""
        return {int(pid) for directory in self.directories for pid in _read(directory / "cgroup.procs").split()}

    def kill_all(self, wait_s: float = 2.0) -> None:
        """SIGKILL every process in the cgroup until none is left (a fork bomb may still be
        forking while the first ones die). Each through a pidfd, and only if its pid is still
        listed once the pidfd is open: a process that ended, and was reaped, between the
        listing and the kill left its pid to be any process's next."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            pids = self.processes()
            if not pids:
                return
            pidfds: dict[int, int] = {}
            for pid in pids:
                try:
                    pidfds[pid] = os.pidfd_open(pid)
                except ProcessLookupError:
                    pass
                except OSError:  # no pidfds (before Linux 5.3): by pid, as the only way
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            try:
                still = self.processes() if pidfds else set()
                for pid, pidfd in pidfds.items():
                    if pid in still:  # the pidfd's process is the member: a pid is one process's at a time
                        with contextlib.suppress(ProcessLookupError):
                            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            finally:
                for pidfd in pidfds.values():
                    os.close(pidfd)
            time.sleep(0.005)

    def remove(self, wait_s: float = 2.0) -> None:
        """Remove the cgroup once its processes are gone (killed ones take a moment)."""
        deadline = time.monotonic() + wait_s
        for directory in self.directories:
            while True:
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() >= deadline:
                        break  # an empty cgroup left behind costs nothing; the next run is unaffected
                    time.sleep(0.01)


def _is_v2(path: Path) -> bool:
    return (path / "cgroup.controllers").is_file()


def _limit_pids(path: Path, limits: Limits) -> None:
    (path / "pids.max").write_text(str(limits.processes))


def _limit_memory(path: Path, limits: Limits) -> None:
    if _is_v2(path):
        (path / "memory.max").write_text(str(limits.memory_bytes))
        swap = path / "memory.swap.max"
    else:
        (path / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
        swap = path / "memory.memsw.limit_in_bytes"  # memory and swap together; set after the memory alone
    if swap.is_file():  # the kernel accounts swap: none of it beyond the limit
        swap.write_text("0" if _is_v2(path) else str(limits.memory_bytes))


def _limit_cpu(path: Path, limits: Limits) -> None:
    quota = max(limits.threads, 1) * CPU_PERIOD_US
    if _is_v2(path):
        (path / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}")
    else:
        (path / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
        (path / "cpu.cfs_quota_us").write_text(str(quota))


_LIMIT = {"pids": _limit_pids, "memory": _limit_memory, "cpu": _limit_cpu}

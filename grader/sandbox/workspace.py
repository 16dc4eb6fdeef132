"""What grading one submission holds on the grader's side, and gives back when it ends.

The grader (the process that forks suite processes) creates, for each submission, a
scratch folder, a cgroup (its processes, memory and CPU share together) and a connection
to a fresh submission zygote, and removes them after the suite process has ended, however
it ended: a suite process killed at its deadline cannot clean up after itself, and its
children's files and cgroup would stay.
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.sandbox import landlock
from grader.sandbox.cgroups import SubmissionCgroup
from grader.sandbox.isolation import Isolation
from grader.sandbox.limits import Limits
from grader.sandbox.zygote import Zygote, ZygoteConfig, ZygoteServer, ZygoteUnavailable

_serial = itertools.count()
_PREFIX = "submission-"  # then the grader's pid: what a killed grader left can be told


@dataclass
class Workspace:
    control: socket.socket  # to the submission zygote; the suite process's, once forked
    scratch_root: Path  # the children's scratch folders are made in here
    cgroup: SubmissionCgroup | None
    config: ZygoteConfig  # sent to the submission zygote, which starts while the suite process is forked

    @classmethod
    def open(cls, isolation: Isolation, limits: Limits, preload: tuple[str, ...], device: str,
             hidden_paths: tuple[str, ...]) -> Workspace:
        """``hidden_paths``: what the student's children must not read (the reference)."""
        _remove_what_dead_graders_left()
        scratch_root = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
        cgroup = None
        try:
            if isolation.cgroup_controllers():
                cgroup = SubmissionCgroup.create(f"{_PREFIX}{os.getpid()}-{next(_serial)}",
                                                 isolation.cgroup_controllers(), limits)
            try:
                control = ZygoteServer.shared().connect(preload)
            except ZygoteUnavailable:  # it died since it was last used: shared() starts another
                control = ZygoteServer.shared().connect(preload)
            hidden_paths = tuple(part for path in hidden_paths for part in _coverable(path, scratch_root))
            config = ZygoteConfig(limits, device, str(scratch_root), hidden_paths, isolation,
                                  tuple(map(str, cgroup.directories)) if cgroup else ())
            try:
                Zygote.configure(control, config)
            except BaseException:
                control.close()
                raise
            return cls(control, scratch_root, cgroup, config)
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            shutil.rmtree(scratch_root, ignore_errors=True)
            raise

    def detach(self) -> None:
        """In the grader, once the suite process is forked: only that process talks to the
        zygote, which then sees the connection close when the suite process ends."""
        self.control.close()

    def release(self) -> None:
        """In the grader, after the suite process has ended: end every process the submission
        left and remove its files and cgroup."""
        self.control.close()
        if self.cgroup is not None:
            self.cgroup.kill_all()
            self.cgroup.remove()
        shutil.rmtree(self.scratch_root, ignore_errors=True)


def _coverable(folder: str, scratch_root: Path) -> list[str]:
    """What to hide of ``folder``: itself, or, where that would hide what the student's process
    runs on, each of its entries that does not (a checkout graded from its root, or lying in a
    folder the process may read: its .git, tests and class folders, not its virtual
    environment). Links are left alone: an empty mount over one would cover where it leads."""
    if not _holds_what_children_run_on(folder, scratch_root):
        return [folder]
    try:
        entries = [entry for entry in os.scandir(folder) if not entry.is_symlink()]
    except OSError:
        return []
    return sorted(entry.path for entry in entries if not _holds_what_children_run_on(entry.path, scratch_root))


def _holds_what_children_run_on(folder: str, scratch_root: Path) -> bool:
    """Whether hiding ``folder`` from a student's process (an empty mount over it, its paths out
    of ``sys.path``) would hide what that process runs on: its scratch, what it reads of the
    system and the Python installation, or this grader's code."""
    return landlock.covers([folder], str(scratch_root)) or _holds_python_or_grader(folder)


@functools.cache  # asked for every submission of a batch, about the same few folders
def _holds_python_or_grader(folder: str) -> bool:
    needed = (*landlock.readable_roots(), str(Path(__file__).resolve().parents[1]))  # the grader package
    return any(landlock.covers([folder], path) for path in needed)


def _remove_what_dead_graders_left() -> None:
    """At every workspace's opening (a quarter of a millisecond): the scratch folders and cgroups
    of graders that were killed (and so could not remove them), told by the pid in their names."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*"):
        if _owner_is_dead(folder.name):
            shutil.rmtree(folder, ignore_errors=True)
    for cgroup in SubmissionCgroup.existing(f"{_PREFIX}*"):
        if _owner_is_dead(cgroup.name):
            cgroup.kill_all()
            cgroup.remove()


def _owner_is_dead(name: str) -> bool:
    pid = name.removeprefix(_PREFIX).split("-")[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, someone else's
        pass
    return False

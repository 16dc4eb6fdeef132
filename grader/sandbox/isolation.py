"""Which optional isolation layers a student's process gets: ``--sandbox strict|basic|off``.

The trust boundary itself (a forked child, its own process group, resource limits,
scratch directory, scrubbed environment, plain-data transport) is never optional. On
top of it, where the machine allows: Landlock (what the child can open), namespaces
(no network, no view of other processes or their IPC objects, a read-only filesystem with
a size-capped scratch, no capabilities; see :mod:`grader.sandbox.namespaces`), seccomp, and
a cgroup per submission that bounds its processes, memory and CPU share together (see
:mod:`grader.sandbox.cgroups`).

- ``basic`` (the default) uses what is available and warns once about what is not;
- ``strict`` refuses to grade unless every layer is available;
- ``off`` uses neither (to debug a submission that behaves differently in the sandbox).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from grader.sandbox import cgroups, landlock, namespaces, seccomp

MODES = ("strict", "basic", "off")
BASE_LAYERS = ["fork-per-submission", "own-process-group", "rlimits", "scratch-dir", "scrubbed-env",
               "import-path-hiding"]


# What namespaces.enter builds, as the report names it.
NAMESPACE_LAYERS = ["no-network", "pid-namespace", "ipc-namespace", "private-proc", "read-only-root", "scratch-tmpfs",
                    "reference-masked", "no-capabilities"]
# What each cgroup controller bounds for the submission as a whole, as a missing layer is named.
CGROUP_LAYERS = {
    "pids": "a pids cgroup, which stops fork bombs (needs a writable pids controller)",
    "memory": "a memory cgroup, which bounds the memory of a submission's processes together "
              "(needs a writable memory controller)",
    "cpu": "a cpu cgroup, which bounds the CPU share of a submission's processes together "
           "(needs a writable cpu controller with CFS bandwidth)",
}


class SandboxUnavailable(RuntimeError):
    """``strict`` was asked for, and a layer is missing here."""


class SandboxWarning(UserWarning):
    pass


@dataclass(frozen=True)
class Isolation:
    landlock: bool
    namespaces: bool
    pids_cgroup: bool = False
    seccomp: bool = False
    memory_cgroup: bool = False
    cpu_cgroup: bool = False
    landlock_note: str = ""  # why Landlock does not protect the reference, if it does not

    def cgroup_controllers(self) -> list[str]:
        """The controllers of the submission's cgroup (see :mod:`grader.sandbox.cgroups`)."""
        wanted = {"pids": self.pids_cgroup, "memory": self.memory_cgroup, "cpu": self.cpu_cgroup}
        return [controller for controller in cgroups.CONTROLLERS if wanted[controller]]

    def layers(self) -> list[str]:
        """The report's ``sandbox`` field."""
        names = list(BASE_LAYERS)
        if self.namespaces:
            names += NAMESPACE_LAYERS
        names += [f"{controller}-cgroup" for controller in self.cgroup_controllers()]
        if self.seccomp:
            names.append("seccomp")
        if self.landlock:
            names.append(f"landlock ({self.landlock_note})" if self.landlock_note else "landlock")
        return names


def choose(mode: str, protected: Path) -> Isolation:
    """The layers for ``mode`` on this machine; ``protected`` must be unreadable to the child."""
    if mode not in MODES:
        raise ValueError(f"unknown sandbox mode {mode!r}: use one of {', '.join(MODES)}")
    if mode == "off":
        return Isolation(landlock=False, namespaces=False)
    missing = []
    has_landlock = landlock.abi_version() > 0
    if not has_landlock:
        missing.append("Landlock (needs Linux 5.13 or later with Landlock enabled)")
    note = ""
    if has_landlock:
        inside = [root for root in landlock.readable_roots() if landlock.covers([root], str(protected))]
        if inside:
            note = f"reference readable: it is inside {inside[0]}"
            missing.append(f"a reference outside the readable directories ({note}; install with pip install -e .)")
    has_namespaces = namespaces.namespaces_available()
    if not has_namespaces:
        missing.append("namespaces (needs root)")
    has_cgroup = {controller: cgroups.available(controller) for controller in cgroups.CONTROLLERS}
    missing += [CGROUP_LAYERS[controller] for controller, present in has_cgroup.items() if not present]
    has_seccomp = seccomp.available()
    if not has_seccomp:
        missing.append("seccomp (needs x86-64 Linux with seccomp filters)")
    if missing and mode == "strict":
        raise SandboxUnavailable("strict isolation: missing " + "; ".join(missing))
    if missing:
        warnings.warn("sandbox layers missing here, grading with the others: " + "; ".join(missing),
                      SandboxWarning, stacklevel=2)
    return Isolation(landlock=has_landlock, namespaces=has_namespaces, pids_cgroup=has_cgroup["pids"],
                     seccomp=has_seccomp, memory_cgroup=has_cgroup["memory"], cpu_cgroup=has_cgroup["cpu"],
                     landlock_note=note)

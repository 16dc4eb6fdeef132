"""Which optional isolation layers a student's process gets: ``--sandbox strict|basic|off``.

The trust boundary itself (a forked child, its own process group, resource limits,
scratch directory, scrubbed environment, plain-data transport) is never optional. On
top of it, where the machine allows: Landlock (what the child can open) and namespaces
(no network, no view of other processes, a read-only filesystem with a size-capped
scratch, no capabilities; see :mod:`grader.sandbox.namespaces`).

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
NAMESPACE_LAYERS = ["no-network", "pid-namespace", "private-proc", "read-only-root", "scratch-tmpfs",
                    "reference-masked", "no-capabilities"]


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
    landlock_note: str = ""  # why Landlock does not protect the reference, if it does not

    def layers(self) -> list[str]:
        """The report's ``sandbox`` field."""
        names = list(BASE_LAYERS)
        if self.namespaces:
            names += NAMESPACE_LAYERS
        if self.pids_cgroup:
            names.append("pids-cgroup")
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
    has_pids_cgroup = cgroups.available()
    if not has_pids_cgroup:
        missing.append("a pids cgroup, which stops fork bombs (needs a writable pids controller)")
    has_seccomp = seccomp.available()
    if not has_seccomp:
        missing.append("seccomp (needs x86-64 Linux with seccomp filters)")
    if missing and mode == "strict":
        raise SandboxUnavailable("strict isolation: missing " + "; ".join(missing))
    if missing:
        warnings.warn("sandbox layers missing here, grading with the others: " + "; ".join(missing),
                      SandboxWarning, stacklevel=2)
    return Isolation(landlock=has_landlock, namespaces=has_namespaces, pids_cgroup=has_pids_cgroup,
                     seccomp=has_seccomp, landlock_note=note)

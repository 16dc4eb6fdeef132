"""Benchmark: the CPU one student's process costs to start, answer one call and end.

    python benchmarks/child_start.py [--sessions 80]

Each session is what every submission pays before any test's own work: the submission's
zygote forked from the zygote server, the sandbox (namespaces, cgroup, Landlock, seccomp),
the student's process, one call into a one-line module, and the ends of all of them. It is
counted two ways: the submission's cgroup's CPU (every process of the session, nothing
else; needs writable cgroups), and the whole machine's busy CPU over the run divided by the
sessions (the grader's side included, and whatever else the machine runs). Sessions run one
at a time, after a few to warm up and a pause in which the zygote server moves its heap onto
huge pages, as it does early in a batch.
"""

from __future__ import annotations

import argparse
import statistics
import time

import common  # noqa: F401  (this checkout's grader first on sys.path)
import reference
from grader.core.ingest import Cell, Program
from grader.sandbox import isolation
from grader.sandbox.limits import Limits
from grader.sandbox.session import StudentSession
from grader.sandbox.workspace import Workspace
from grader.sandbox.zygote import Zygote

PROGRAM = Program("module", (Cell("def add_one(x):\n    return x + 1\n", "module"),))
WARM_UP, HUGE_PAGES_S = 5, 4.0


def machine_busy_s() -> float:
    """CPU seconds the machine has been busy since it started (every CPU, idle and iowait excluded)."""
    fields = [int(field) for field in open("/proc/stat").readline().split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / 100


def one_session(layers: isolation.Isolation) -> float | None:
    """Start, call and end one student's process; the CPU seconds of its cgroup (None without one)."""
    limits = Limits()
    workspace = Workspace.open(layers, limits, (), "cpu", (str(reference.PACKAGE_DIR),))
    try:
        zygote = Zygote.open(workspace.control, workspace.config)
        session = StudentSession(zygote, PROGRAM, limits, None)
        assert session.call("add_one", 1) == 2
        session.close()
        zygote.stop()
        cgroup = workspace.cgroup
        if cgroup is None:
            return None
        deadline = time.monotonic() + 5
        while cgroup.processes() and time.monotonic() < deadline:  # their exits count too
            time.sleep(0.002)
        return cgroup.cpu_seconds()
    finally:
        workspace.release()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=80)
    args = parser.parse_args()

    layers = isolation.choose("basic", reference.PACKAGE_DIR)
    print(f"sandbox: {', '.join(layers.layers())}")
    for _ in range(WARM_UP):
        one_session(layers)
    time.sleep(HUGE_PAGES_S)
    busy, started = machine_busy_s(), time.perf_counter()
    used = [one_session(layers) for _ in range(args.sessions)]
    busy, elapsed = machine_busy_s() - busy, time.perf_counter() - started
    print(f"sessions: {args.sessions}, one at a time")
    print(f"machine CPU per session: {busy / args.sessions * 1000:.1f} ms; wall per session: "
          f"{elapsed / args.sessions * 1000:.1f} ms")
    if None not in used:
        quartiles = statistics.quantiles([seconds * 1000 for seconds in used], n=4)
        print(f"the session's cgroup, CPU per session: median {quartiles[1]:.1f} ms "
              f"(quartiles {quartiles[0]:.1f}-{quartiles[2]:.1f})")
    else:
        print("the session's cgroup: none here (cgroups not writable)")


if __name__ == "__main__":
    main()
